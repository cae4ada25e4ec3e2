package stack

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/webhook"
)

// sidReadWebhookSecret lets the functions that sign webhook deliveries
// (all three) read the signing secret, and nothing else of Secrets Manager.
const sidReadWebhookSecret = "ReadWebhookSecret"

// validateWebhooks checks the webhook props.
func validateWebhooks(p AgentgateStackProps) error {
	if p.WebhookSecretArn == "" {
		if p.WebhookAllow != "" {
			return fmt.Errorf("webhook allow-list %q needs a webhook secret ARN", p.WebhookAllow)
		}
		if p.WebhookConcurrency != 0 {
			return fmt.Errorf("webhook concurrency %d needs a webhook secret ARN", p.WebhookConcurrency)
		}
		return nil
	}
	if p.WebhookConcurrency != 0 {
		if _, err := webhook.ParseConcurrency(strconv.Itoa(p.WebhookConcurrency)); err != nil {
			return fmt.Errorf("webhook concurrency: %w", err)
		}
	}
	if !strings.HasPrefix(p.WebhookSecretArn, "arn:") || !strings.Contains(p.WebhookSecretArn, ":secretsmanager:") {
		return fmt.Errorf("webhook secret %q: want a Secrets Manager secret ARN", p.WebhookSecretArn)
	}
	if _, err := webhook.ParseAllowList(p.WebhookAllow); err != nil {
		return fmt.Errorf("webhook allow-list: %w", err)
	}
	return nil
}

// addWebhooks turns webhooks on: every function gets the variables and may
// read exactly the signing secret. startrun checks a run's webhook_url
// against the policy; the workers (startrun and resume) make the first
// attempt of the delivery their transition scheduled as soon as their job
// ends, so a caller hears of a suspension or an ending at once; purge makes
// the retries, and the first attempts of what the API and the sweep
// ended (a cancel, an expiry).
func addWebhooks(p AgentgateStackProps, fns functions) {
	if p.WebhookSecretArn == "" {
		return
	}
	for _, fn := range []awslambda.Function{fns.startrun, fns.resume, fns.purge} {
		fn.AddEnvironment(jsii.String(webhook.EnvSecret), jsii.String(p.WebhookSecretArn), nil)
		if p.WebhookAllow != "" {
			fn.AddEnvironment(jsii.String(webhook.EnvAllow), jsii.String(p.WebhookAllow), nil)
		}
		fn.AddToRolePolicy(allow(sidReadWebhookSecret, []string{"secretsmanager:GetSecretValue"}, []*string{jsii.String(p.WebhookSecretArn)}, nil))
	}
	if p.WebhookConcurrency != 0 {
		// Only the sweep delivers for several runs at once.
		fns.purge.AddEnvironment(jsii.String(webhook.EnvConcurrency), jsii.String(strconv.Itoa(p.WebhookConcurrency)), nil)
	}
}
