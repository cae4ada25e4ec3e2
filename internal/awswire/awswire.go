package awswire

import (
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/dispatch"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/s3state"
	"github.com/agentgate/agentgate/internal/webhook"
)

// Outbound is the Store option that schedules webhook deliveries with the
// transitions; every process that writes runs sets it, whether it sends
// deliveries or not.
func Outbound() runs.OutboundFunc { return webhook.Outbound(routes.RunLinks) }

// NewS3 builds the S3 client: path-style addressing for an emulator (moto,
// LocalStack: a base endpoint is set), virtual-hosted style on AWS.
func NewS3(awsCfg aws.Config) *s3.Client {
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = awsCfg.BaseEndpoint != nil })
}

// NewStore builds the run store on the configured table and bucket.
func NewStore(c config.Config, awsCfg aws.Config, s3c *s3.Client, logger *slog.Logger) (*runs.Store, error) {
	if c.Table == "" || c.Bucket == "" {
		return nil, fmt.Errorf("awswire: table and bucket are required")
	}
	rows := dynamo.NewTable(dynamodb.NewFromConfig(awsCfg), c.Table, dynamo.Options{DueShards: c.DueShards})
	states := s3state.NewBucket(s3c, c.Bucket, s3state.Options{KMSKeyID: c.KMSKeyID})
	return runs.NewStore(rows, states, runs.Options{Retention: c.Retention, Logger: logger, Outbound: Outbound()}), nil
}

// NewMailer builds the SES mailer of AGENTGATE_MAIL_FROM, sending through
// the API of AGENTGATE_SES_API (SES v2 by default), or returns nil when no
// sender is configured (approvers then use the API only).
func NewMailer(c config.Config, awsCfg aws.Config) (approval.Mailer, error) {
	if c.MailFrom == "" {
		return nil, nil
	}
	if c.PublicBaseURL == "" {
		return nil, fmt.Errorf("%s is needed to mail approval links", config.EnvPublicBaseURL)
	}
	client, err := awscall.New(awsCfg, c.SESAPI.Service())
	if err != nil {
		return nil, err
	}
	return approval.NewSESMailer(client, c.MailFrom, c.SESAPI), nil
}

// NewDispatcher builds the async Lambda invoke of the worker functions.
func NewDispatcher(c config.Config, awsCfg aws.Config) (*dispatch.Lambda, error) {
	client, err := awscall.New(awsCfg, awscall.Lambda)
	if err != nil {
		return nil, err
	}
	return &dispatch.Lambda{Client: client, RunFunction: c.StartRunFunction, ResumeFunction: c.ResumeFunction}, nil
}

// Webhooks reads the webhook configuration (AGENTGATE_WEBHOOK_SECRET,
// AGENTGATE_WEBHOOK_ALLOW) with getenv: nil when webhooks are off. The
// signing secret is read from Secrets Manager only when a delivery is
// signed (the purge function), and re-read after webhook.SecretRefresh.
func Webhooks(getenv func(string) string, awsCfg aws.Config) (*webhook.SenderConfig, error) {
	wc, err := webhook.LoadConfig(getenv)
	if err != nil {
		return nil, err
	}
	if !wc.Enabled() {
		return nil, nil
	}
	secrets, err := awscall.NewSecrets(awsCfg)
	if err != nil {
		return nil, err
	}
	return &webhook.SenderConfig{Signer: webhook.NewSecretsManagerSource(secrets, wc.SecretID, nil), Policy: wc.Policy}, nil
}
