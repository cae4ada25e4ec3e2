//go:build integration

package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
	"github.com/agentgate/agentgate/internal/webhook"
)

// TestKeptWhileTheSecretIsUnreadableDynamoDB: the deliveries of a process
// whose webhook secret, in Secrets Manager on the emulator, is deleted
// (scheduled for deletion: GetSecretValue is refused) are kept on the
// DynamoDB run rows without using up attempts, and sent, verified, once the
// secret is restored.
func TestKeptWhileTheSecretIsUnreadableDynamoDB(t *testing.T) {
	env := awstest.New(t)
	ctx := context.Background()
	client := secretsmanager.NewFromConfig(env.Config)
	value, err := webhook.GenerateSecret()
	require.NoError(t, err)
	out, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(fmt.Sprintf("agentgate-webhook-unreadable-%d", time.Now().UnixNano())), SecretString: aws.String(value)})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = client.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: out.ARN, ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	secrets, err := awscall.NewSecrets(env.Config)
	require.NoError(t, err)
	runKeptWhileTheSecretIsUnreadable(t, env.Table, env.Bucket, secretSwitch{
		secrets: secrets, id: *out.ARN, value: value, reason: "InvalidRequestException",
		unreadable: func(t *testing.T) {
			_, err := client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: out.ARN, RecoveryWindowInDays: aws.Int64(7)})
			require.NoError(t, err)
			_, err = secrets.SecretString(ctx, *out.ARN)
			require.Error(t, err, "a secret scheduled for deletion cannot be read")
		},
		readable: func(t *testing.T) {
			_, err := client.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: out.ARN})
			require.NoError(t, err)
		},
	})
}
