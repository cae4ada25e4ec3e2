package stack

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/webhook"
)

// sidReadWebhookSecret lets purge, the only function that signs webhook
// deliveries, read the signing secret.
const sidReadWebhookSecret = "ReadWebhookSecret"

// validateWebhooks checks the webhook props.
func validateWebhooks(p AgentgateStackProps) error {
	if p.WebhookSecretArn == "" {
		if p.WebhookAllow != "" {
			return fmt.Errorf("webhook allow-list %q needs a webhook secret ARN", p.WebhookAllow)
		}
		return nil
	}
	if !strings.HasPrefix(p.WebhookSecretArn, "arn:") || !strings.Contains(p.WebhookSecretArn, ":secretsmanager:") {
		return fmt.Errorf("webhook secret %q: want a Secrets Manager secret ARN", p.WebhookSecretArn)
	}
	if _, err := webhook.ParseAllowList(p.WebhookAllow); err != nil {
		return fmt.Errorf("webhook allow-list: %w", err)
	}
	return nil
}

// addWebhooks turns webhooks on: startrun checks a run's webhook_url
// against the policy (it needs the variables, not the secret), purge sends
// the deliveries and may read exactly the signing secret. Resume only
// schedules deliveries with its transitions and needs neither.
func addWebhooks(p AgentgateStackProps, fns functions) {
	if p.WebhookSecretArn == "" {
		return
	}
	for _, fn := range []awslambda.Function{fns.startrun, fns.purge} {
		fn.AddEnvironment(jsii.String(webhook.EnvSecret), jsii.String(p.WebhookSecretArn), nil)
		if p.WebhookAllow != "" {
			fn.AddEnvironment(jsii.String(webhook.EnvAllow), jsii.String(p.WebhookAllow), nil)
		}
	}
	fns.purge.AddToRolePolicy(allow(sidReadWebhookSecret, []string{"secretsmanager:GetSecretValue"}, []*string{jsii.String(p.WebhookSecretArn)}, nil))
}
