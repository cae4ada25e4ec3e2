//go:build integration

package webhook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
	"github.com/agentgate/agentgate/internal/webhook"
)

// TestSecretsManagerSourceOnEmulator reads the signing secret from Secrets
// Manager on the emulator, as the functions do, and signs with it.
func TestSecretsManagerSourceOnEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Config(t)
	client := secretsmanager.NewFromConfig(cfg)
	name := fmt.Sprintf("agentgate-webhook-test-%d", time.Now().UnixNano())
	out, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(testSecret)})
	if err != nil {
		t.Fatalf("create secret: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: out.ARN, ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	secrets, err := awscall.NewSecrets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := webhook.NewSecretsManagerSource(secrets, *out.ARN, nil).CurrentSigner(ctx)
	if err != nil {
		t.Fatalf("CurrentSigner: %v", err)
	}
	wh, _ := standardwebhooks.NewWebhook(testSecret)
	if err := wh.Verify([]byte("{}"), headersFor(t, s, "msg_1", time.Now(), []byte("{}"))); err != nil {
		t.Errorf("reference Verify: %v", err)
	}
}
