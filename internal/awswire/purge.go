package awswire

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/awsenv"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/lambdaentry"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// PurgeRequired lists the variables the purge function cannot start
// without.
var PurgeRequired = []string{config.EnvTable, config.EnvBucket, config.EnvStartRunFunction, config.EnvResumeFunction}

// Purge reads the environment with getenv (os.Getenv in main) once, builds
// the sweep's adapters and returns the handler of the purge function: the
// scheduled sweep (approval expiry and reminders, stale leases, lost
// dispatches, webhook deliveries, retention).
func Purge(ctx context.Context, getenv func(string) string) (*lambdaentry.Entry, error) {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "purge")
	slog.SetDefault(logger)
	cfg, err := config.Load(getenv, PurgeRequired...)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return nil, err
	}
	sweeper, err := NewSweeper(cfg, awsCfg, getenv, "purge/"+getenv("AWS_LAMBDA_LOG_STREAM_NAME"), logger)
	if err != nil {
		return nil, err
	}
	return &lambdaentry.Entry{Sweep: sweeper.Sweep}, nil
}

// NewSweeper builds the sweep on AWS: the run store, re-dispatch through
// Lambda, reminders through SES (when a sender is configured) and webhook
// delivery (when a signing secret is), for the runs of
// cfg.DeliveryConcurrency at the same time. owner names the process in the
// records of reminders.
func NewSweeper(cfg config.Config, awsCfg aws.Config, getenv func(string) string, owner string, logger *slog.Logger) (*service.Sweeper, error) {
	store, err := NewStore(cfg, awsCfg, NewS3(awsCfg), logger)
	if err != nil {
		return nil, err
	}
	mailer, err := NewMailer(cfg, awsCfg)
	if err != nil {
		return nil, err
	}
	// Reminders are the worker's: new tokens and links, recorded, mailed to
	// the eligible approvers (the directory resolves groups and persons);
	// so is the mail of those a quorum check asks (Revise).
	var dir *identity.Directory
	if cfg.DirectoryFile != "" {
		if dir, err = identity.LoadDirectory(cfg.DirectoryFile); err != nil {
			return nil, err
		}
	}
	reminders := &service.Worker{Store: store, NewToken: approval.NewToken, Notifier: service.MailNotifier(mailer, cfg.PublicBaseURL, dir),
		Directory: dir, Owner: owner, Logger: logger}
	disp, err := NewDispatcher(cfg, awsCfg)
	if err != nil {
		return nil, err
	}
	// The directory also checks waiting runs' quorums again (a person or a
	// group gone since the turn was held).
	s := &service.Sweeper{Store: store, Dispatch: disp, Remind: reminders.Remind, RetryMail: reminders.RetryMail, Revise: reminders.ReviseDeciders, Directory: dir,
		QuorumCheckEvery: cfg.QuorumCheckEvery, Logger: logger, DeliveryConcurrency: cfg.DeliveryConcurrency}
	hooks, err := Webhooks(getenv, awsCfg)
	if err != nil {
		return nil, err
	}
	if hooks != nil {
		if s.Webhooks, err = webhook.NewSender(*hooks); err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
	}
	return s, nil
}
