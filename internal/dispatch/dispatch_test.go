package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/agentgate/agentgate/internal/service"
)

type invoker struct{ got []*lambda.InvokeInput }

func (i *invoker) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	i.got = append(i.got, in)
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

func TestLambdaInvokesTheJobsFunctionAsynchronously(t *testing.T) {
	inv := &invoker{}
	d := &Lambda{Client: inv, RunFunction: "run-fn", ResumeFunction: "resume-fn"}
	for _, j := range []service.Job{{Kind: service.JobRun, RunID: "r1"}, {Kind: service.JobResume, RunID: "r2"}} {
		if err := d.Dispatch(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	if len(inv.got) != 2 {
		t.Fatalf("%d invokes, want 2", len(inv.got))
	}
	for i, want := range []struct{ fn, payload string }{
		{"run-fn", `{"agentgate_job":{"kind":"run","run_id":"r1"}}`},
		{"resume-fn", `{"agentgate_job":{"kind":"resume","run_id":"r2"}}`},
	} {
		in := inv.got[i]
		if *in.FunctionName != want.fn || in.InvocationType != types.InvocationTypeEvent || string(in.Payload) != want.payload {
			t.Errorf("invoke %d: %s %s %s, want %s Event %s", i, *in.FunctionName, in.InvocationType, in.Payload, want.fn, want.payload)
		}
	}
	if err := d.Dispatch(t.Context(), service.Job{Kind: "other", RunID: "r"}); err == nil {
		t.Error("an unknown job kind was dispatched")
	}
	if err := (&Lambda{Client: inv}).Dispatch(t.Context(), service.Job{Kind: service.JobRun, RunID: "r"}); err == nil {
		t.Error("a job without a configured function was dispatched")
	}
}

type handler struct {
	mu   sync.Mutex
	jobs []service.Job
}

func (h *handler) Handle(_ context.Context, j service.Job) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs = append(h.jobs, j)
	return errors.New("logged, not returned")
}

func TestInProcessRunsTheJobOutsideTheCallersContext(t *testing.T) {
	h := &handler{}
	d := &InProcess{Worker: h}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Dispatch(ctx, service.Job{Kind: service.JobRun, RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	d.Wait()
	if len(h.jobs) != 1 || h.jobs[0].RunID != "r1" {
		t.Errorf("jobs %v, want the one dispatched", h.jobs)
	}
	if err := d.Dispatch(t.Context(), service.Job{Kind: service.JobRun}); err == nil {
		t.Error("a job without a run id was dispatched")
	}
}
