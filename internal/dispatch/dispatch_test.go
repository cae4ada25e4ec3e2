package dispatch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/service"
)

// invokeAPI stands for Lambda's Invoke API: it records each call and
// answers 202, as Lambda answers an accepted async invoke.
type invokeAPI struct {
	mu    sync.Mutex
	calls []invokeCall
}

type invokeCall struct{ path, invocationType, auth, payload string }

func (a *invokeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.calls = append(a.calls, invokeCall{r.URL.Path, r.Header.Get("X-Amz-Invocation-Type"), r.Header.Get("Authorization"), string(body)})
	a.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func TestLambdaInvokesTheJobsFunctionAsynchronously(t *testing.T) {
	api := &invokeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client, err := awscall.New(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}, awscall.Lambda)
	if err != nil {
		t.Fatal(err)
	}
	d := &Lambda{Client: client, RunFunction: "run-fn", ResumeFunction: "resume-fn"}
	for _, j := range []service.Job{{Kind: service.JobRun, RunID: "r1"}, {Kind: service.JobResume, RunID: "r2"}, {Kind: service.JobDeliver, RunID: "r3"}} {
		if err := d.Dispatch(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	if len(api.calls) != 3 {
		t.Fatalf("%d invokes, want 3", len(api.calls))
	}
	for i, want := range []struct{ path, payload string }{
		{"/2015-03-31/functions/run-fn/invocations", `{"agentgate_job":{"kind":"run","run_id":"r1"}}`},
		{"/2015-03-31/functions/resume-fn/invocations", `{"agentgate_job":{"kind":"resume","run_id":"r2"}}`},
		{"/2015-03-31/functions/resume-fn/invocations", `{"agentgate_job":{"kind":"deliver","run_id":"r3"}}`},
	} {
		got := api.calls[i]
		if got.path != want.path || got.invocationType != "Event" || got.payload != want.payload {
			t.Errorf("invoke %d: %s %s %s, want %s Event %s", i, got.path, got.invocationType, got.payload, want.path, want.payload)
		}
		if !strings.Contains(got.auth, "/eu-west-1/lambda/aws4_request") {
			t.Errorf("invoke %d: Authorization %q is not a SigV4 signature for lambda in eu-west-1", i, got.auth)
		}
	}
	if err := d.Dispatch(t.Context(), service.Job{Kind: "other", RunID: "r"}); err == nil {
		t.Error("an unknown job kind was dispatched")
	}
	if err := (&Lambda{Client: client}).Dispatch(t.Context(), service.Job{Kind: service.JobRun, RunID: "r"}); err == nil {
		t.Error("a job without a configured function was dispatched")
	}
	if len(api.calls) != 3 {
		t.Errorf("%d invokes after the refused dispatches, want 3", len(api.calls))
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
