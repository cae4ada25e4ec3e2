package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/service"
)

// AWSOptions configure NewAWS.
type AWSOptions struct {
	Config config.Config
	// AWS is the SDK configuration, loaded once in main.
	AWS   aws.Config
	Model loop.Model
	// ToolSources are MCP servers' tools (nil: none).
	ToolSources ToolSources
	Routes      routes.Table
	// Owner names this function instance in lease owners.
	Owner  string
	Logger *slog.Logger
	// Dispatch replaces the Lambda async-invoke dispatcher (the local server
	// on DynamoDB+S3 dispatches in-process).
	Dispatch service.Dispatcher
	// Mailer, when set and no sender is configured (AGENTGATE_MAIL_FROM),
	// replaces SES: the local server's outbox. It is built by the caller so
	// that the Lambdas do not link the outbox (issue #15).
	Mailer approval.Mailer
	// Webhooks configure webhook delivery (nil: none).
	Webhooks *Webhooks
	// Governance, when set, replaces the directory and policy files of
	// Config (the local server loads them itself).
	Governance *Governance
	// SegmentBudget, when positive, ends a worker's segment after this
	// long (serve --segment-budget); a Lambda's segments end before its
	// deadline in any case.
	SegmentBudget time.Duration
	// MaxWait bounds how long GET /runs/{id}?wait=S holds a request: the
	// local server on DynamoDB+S3 passes runs.MaxWait; the functions leave
	// it 0 and answer at once, as a held request would hold a Lambda of
	// the function that also runs the workers.
	MaxWait time.Duration
}

// NewAWS builds the App on DynamoDB, S3, SES (v2, or v1 with
// AGENTGATE_SES_API=v1) and Lambda async dispatch.
// Every SDK client is built here, once.
func NewAWS(o AWSOptions) (*App, error) {
	c := o.Config
	s3c := awswire.NewS3(o.AWS)
	store, err := awswire.NewStore(c, o.AWS, s3c, o.Logger)
	if err != nil {
		return nil, err
	}
	docs, err := docstore.NewS3Backend(s3c, docstore.S3Config{Bucket: c.Bucket, KMSKeyID: c.KMSKeyID})
	if err != nil {
		return nil, err
	}
	var mailer approval.Mailer
	if c.MailFrom == "" && o.Mailer != nil {
		mailer = o.Mailer
	} else if mailer, err = awswire.NewMailer(c, o.AWS); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	var gov Governance
	if o.Governance != nil {
		gov = *o.Governance
	} else if gov, err = LoadGovernance(c.DirectoryFile, c.PolicyFile); err != nil {
		return nil, err
	}
	disp := o.Dispatch
	if disp == nil {
		if disp, err = awswire.NewDispatcher(c, o.AWS); err != nil {
			return nil, err
		}
	}
	return New(Deps{
		Store: store, Docs: docs, Model: o.Model, Dispatch: disp, Mailer: mailer, ToolSources: o.ToolSources,
		PublicBaseURL: c.PublicBaseURL, ApprovalTTL: c.ApprovalTTL, Owner: o.Owner, AllowedModels: c.AllowedModels,
		Routes: o.Routes, Webhooks: o.Webhooks, Logger: o.Logger, Governance: gov, SegmentBudget: o.SegmentBudget,
		MaxWait: o.MaxWait, QuorumChecks: c.QuorumChecks, QuorumCheckEvery: c.QuorumCheckEvery,
	})
}
