package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/awsenv"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/lambdaentry"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// Function names a worker Lambda (the purge function is wired by
// awswire.Purge).
type Function string

// The worker functions.
const (
	StartRun Function = "startrun"
	Resume   Function = "resume"
)

// required lists the variables each function cannot start without; the
// ModelFactory checks the model's (provider.LoadConfig: AGENTGATE_MODEL).
var required = map[Function][]string{
	StartRun: {config.EnvTable, config.EnvBucket, config.EnvStartRunFunction},
	Resume:   {config.EnvTable, config.EnvBucket, config.EnvResumeFunction},
}

// ModelFactory builds the configured model once at start-up (provider.New).
type ModelFactory func(ctx context.Context, awsCfg aws.Config) (loop.Model, error)

// LambdaEntry reads the environment once, loads the AWS configuration from
// it once (awsenv: the function's credentials and region, no default
// chain), builds the adapters and returns the handler the function's main
// starts: the API routes of fn and its worker jobs.
func LambdaEntry(ctx context.Context, fn Function, newModel ModelFactory) (*lambdaentry.Entry, error) {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", string(fn))
	slog.SetDefault(logger)
	if _, ok := required[fn]; !ok || newModel == nil {
		return nil, fmt.Errorf("app: %q is not a worker function with a model", fn)
	}
	cfg, err := config.Load(os.Getenv, required[fn]...)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsenv.Load(os.Getenv)
	if err != nil {
		return nil, err
	}
	model, err := newModel(ctx, awsCfg)
	if err != nil {
		return nil, err
	}
	tools, err := lambdaToolSources(ctx, awsCfg, logger)
	if err != nil {
		return nil, err
	}
	served := routes.All().ServedBy(routes.Function(fn))
	var hooks *Webhooks
	if sc, err := awswire.Webhooks(os.Getenv, awsCfg); err != nil {
		return nil, err
	} else if sc != nil {
		hooks = &Webhooks{Signer: sc.Signer, Policy: sc.Policy}
	}
	a, err := NewAWS(AWSOptions{Config: cfg, AWS: awsCfg, Model: model, Routes: served, ToolSources: tools,
		Owner: string(fn) + "/" + os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"), Logger: logger, Webhooks: hooks})
	if err != nil {
		return nil, err
	}
	entry := &lambdaentry.Entry{API: a.API.Handle, Worker: a.Worker.Handle}
	if hooks != nil {
		firstAttemptsAtJobEnd(entry, a, logger)
	}
	relistAtJobEnd(entry, tools, logger)
	return entry, nil
}

// inlineDeliveryBudget bounds the time a worker spends, after its job, on
// the first attempts of the deliveries its transitions scheduled: two
// attempts at their longest (webhook.DefaultTimeout each); the rest wait
// for the sweep.
const inlineDeliveryBudget = 2 * webhook.DefaultTimeout

// firstAttemptsAtJobEnd makes a worker function send the first attempt of
// every delivery its job's writes scheduled (a suspension, an ending) once
// the job is over, rather than leave it to purge's next sweep, up to a
// minute later. API requests never wait for a receiver: what they schedule
// for a run no worker takes up (a cancel of a waiting run) goes to a
// deliver job (service.JobDeliver) on the resume function. An invocation
// near its deadline leaves its attempts to the sweep.
func firstAttemptsAtJobEnd(entry *lambdaentry.Entry, a *App, logger *slog.Logger) {
	var mu sync.Mutex
	var scheduled []string
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		ids := scheduled
		scheduled = nil
		return ids
	}
	a.Sweeper.Store.NotifyScheduled(func(runID string) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(scheduled, runID) {
			scheduled = append(scheduled, runID)
		}
	})
	inline := &service.Sweeper{Store: a.Sweeper.Store, Webhooks: a.Sweeper.Webhooks, Schedule: a.Sweeper.Schedule,
		DeliveryBudget: inlineDeliveryBudget, Logger: logger}
	worker, api := entry.Worker, entry.API
	entry.Worker = func(ctx context.Context, job service.Job) error {
		var err error
		if job.Kind == service.JobDeliver {
			if err := job.Validate(); err != nil {
				return err
			}
			if _, err := inline.DeliverRun(ctx, job.RunID); err != nil {
				logger.WarnContext(ctx, "webhook: deliver job failed; the sweep makes the attempts", "run_id", job.RunID, "err", err)
			}
		} else {
			err = worker(ctx, job)
		}
		for _, id := range take() {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < inlineDeliveryBudget+5*time.Second {
				logger.InfoContext(ctx, "webhook: first attempt left to the sweep (the invocation is near its deadline)", "run_id", id)
				continue
			}
			_, _ = inline.DeliverRun(ctx, id)
		}
		return err
	}
	entry.API = func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		resp, err := api(ctx, req)
		// A run the request left waiting or ended (a cancel) goes to no
		// worker: a deliver job makes its first attempts, so the request
		// waits for no receiver. A lost dispatch leaves them to the sweep.
		for _, id := range take() {
			if derr := a.Worker.Dispatch.Dispatch(ctx, service.Job{Kind: service.JobDeliver, RunID: id}); derr != nil {
				logger.WarnContext(ctx, "webhook: deliver job not dispatched; the sweep makes the attempts", "run_id", id, "err", derr)
			}
		}
		return resp, err
	}
}
