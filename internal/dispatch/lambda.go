package dispatch

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/service"
)

// Caller sends one signed AWS call; *awscall.Client of awscall.Lambda is
// the one Lambda uses.
type Caller interface {
	Do(ctx context.Context, r awscall.Request) (*awscall.Response, error)
}

// Lambda dispatches jobs as async invokes (InvocationType=Event) of the
// worker functions: run jobs to RunFunction, resume jobs to ResumeFunction.
// It calls Lambda's Invoke API (POST
// /2015-03-31/functions/{name}/invocations) through awscall rather than
// the SDK's Lambda client, which would cost every function 0.69 MB.
type Lambda struct {
	Client         Caller
	RunFunction    string
	ResumeFunction string
}

var _ service.Dispatcher = (*Lambda)(nil)

// Dispatch invokes the job's worker function asynchronously.
func (d *Lambda) Dispatch(ctx context.Context, job service.Job) error {
	if err := job.Validate(); err != nil {
		return err
	}
	fn := d.RunFunction
	if job.Kind == service.JobResume || job.Kind == service.JobDeliver {
		// The resume function serves the requests that schedule a
		// delivery without a worker job (a cancel) and may sign webhooks.
		fn = d.ResumeFunction
	}
	if fn == "" {
		return fmt.Errorf("dispatch %s job: no function configured for it", job.Kind)
	}
	_, err := d.Client.Do(ctx, awscall.Request{
		Method: http.MethodPost,
		Path:   "/2015-03-31/functions/" + fn + "/invocations",
		Header: http.Header{"X-Amz-Invocation-Type": {"Event"}, "Content-Type": {"application/json"}},
		Body:   job.Payload(),
	})
	if err != nil {
		return fmt.Errorf("dispatch %s job of run %s to %s: %w", job.Kind, job.RunID, fn, err)
	}
	return nil
}
