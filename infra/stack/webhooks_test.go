package stack

import (
	"strings"
	"testing"
)

const webhookSecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:agentgate-webhooks-AbCdEf"

// TestWebhooksLeastPrivilege: with a webhook secret, every function gets
// the variables and may read exactly that secret (GetSecretValue on its
// ARN, nothing else of Secrets Manager): startrun checks targets, the
// workers make first attempts, purge the retries.
func TestWebhooksLeastPrivilege(t *testing.T) {
	s := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, WebhookSecretArn: webhookSecret, WebhookAllow: "10.1.0.0/16"})
	for _, name := range []string{"startrun", "resume", "purge"} {
		_, fn := s.functionByName(t, testStackName+"-"+name)
		env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		var secrets []string
		for _, st := range roleStatements(t, s, functionRole(t, s, name)) {
			for _, a := range st.actions {
				if strings.HasPrefix(a, "secretsmanager:") && st.sid != sidReadWebhookSecret {
					t.Errorf("%s: %s allows %s", name, st.sid, a)
				}
			}
			if st.sid == sidReadWebhookSecret {
				if strings.Join(st.actions, ",") != "secretsmanager:GetSecretValue" {
					t.Errorf("%s: %s allows %v, want only secretsmanager:GetSecretValue", name, st.sid, st.actions)
				}
				secrets = append(secrets, st.resources...)
			}
		}
		if env["AGENTGATE_WEBHOOK_SECRET"] != webhookSecret || env["AGENTGATE_WEBHOOK_ALLOW"] != "10.1.0.0/16" {
			t.Errorf("%s env: %v %v", name, env["AGENTGATE_WEBHOOK_SECRET"], env["AGENTGATE_WEBHOOK_ALLOW"])
		}
		if strings.Join(secrets, ",") != webhookSecret {
			t.Errorf("%s may read %v, want exactly the webhook secret", name, secrets)
		}
		if _, ok := env["AGENTGATE_WEBHOOK_CONCURRENCY"]; ok {
			t.Errorf("%s has AGENTGATE_WEBHOOK_CONCURRENCY without WebhookConcurrency (the function's default applies)", name)
		}
	}
}

// TestWebhookConcurrency: WebhookConcurrency is the purge function's
// AGENTGATE_WEBHOOK_CONCURRENCY (only the sweep delivers for several runs
// at once).
func TestWebhookConcurrency(t *testing.T) {
	s := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, WebhookSecretArn: webhookSecret, WebhookConcurrency: 16})
	for _, name := range []string{"startrun", "resume", "purge"} {
		_, fn := s.functionByName(t, testStackName+"-"+name)
		got, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_WEBHOOK_CONCURRENCY"]
		switch {
		case name == "purge" && got != "16":
			t.Errorf("purge: AGENTGATE_WEBHOOK_CONCURRENCY = %v, want 16", got)
		case name != "purge" && ok:
			t.Errorf("%s: AGENTGATE_WEBHOOK_CONCURRENCY = %v, want none (it does not sweep)", name, got)
		}
	}
}

func TestNoWebhookSecretNoWebhooks(t *testing.T) {
	s := defaultTemplate(t)
	for _, name := range []string{"startrun", "resume", "purge"} {
		_, fn := s.functionByName(t, testStackName+"-"+name)
		env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		if _, ok := env["AGENTGATE_WEBHOOK_SECRET"]; ok {
			t.Errorf("%s has AGENTGATE_WEBHOOK_SECRET without a secret", name)
		}
		for _, st := range roleStatements(t, s, functionRole(t, s, name)) {
			if st.sid == sidReadWebhookSecret {
				t.Errorf("%s may read a webhook secret without one", name)
			}
		}
	}
}

func TestWebhookPropsValidated(t *testing.T) {
	for _, p := range []AgentgateStackProps{
		{WebhookSecretArn: "agentgate-webhooks"},
		{WebhookAllow: "10.0.0.0/8"},
		{WebhookSecretArn: webhookSecret, WebhookAllow: "10.0.0.1/8"},
		{WebhookConcurrency: 4},
		{WebhookSecretArn: webhookSecret, WebhookConcurrency: -1},
		{WebhookSecretArn: webhookSecret, WebhookConcurrency: 65},
	} {
		if err := validateWebhooks(p); err == nil {
			t.Errorf("validateWebhooks(%+v) = nil, want an error", p)
		}
	}
	if err := validateWebhooks(AgentgateStackProps{WebhookSecretArn: webhookSecret}); err != nil {
		t.Errorf("a valid secret ARN: %v", err)
	}
	for _, n := range []int{1, 64} {
		if err := validateWebhooks(AgentgateStackProps{WebhookSecretArn: webhookSecret, WebhookConcurrency: n}); err != nil {
			t.Errorf("webhook concurrency %d: %v", n, err)
		}
	}
}
