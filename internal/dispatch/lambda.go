package dispatch

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/agentgate/agentgate/internal/service"
)

// LambdaInvoker is the part of the Lambda client Lambda uses.
type LambdaInvoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Lambda dispatches jobs as async invokes (InvocationType=Event) of the
// worker functions: run jobs to RunFunction, resume jobs to ResumeFunction.
type Lambda struct {
	Client         LambdaInvoker
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
	if job.Kind == service.JobResume {
		fn = d.ResumeFunction
	}
	if fn == "" {
		return fmt.Errorf("dispatch %s job: no function configured for it", job.Kind)
	}
	_, err := d.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(fn),
		InvocationType: types.InvocationTypeEvent,
		Payload:        job.Payload(),
	})
	if err != nil {
		return fmt.Errorf("dispatch %s job of run %s to %s: %w", job.Kind, job.RunID, fn, err)
	}
	return nil
}
