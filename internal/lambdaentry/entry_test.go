package lambdaentry

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/service"
)

func TestHandleRecognisesEvents(t *testing.T) {
	var got []string
	e := &Entry{
		API: func(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			got = append(got, "api "+req.HTTPMethod+" "+req.Path)
			return events.APIGatewayProxyResponse{StatusCode: 200}, nil
		},
		Worker: func(_ context.Context, job service.Job) error {
			got = append(got, "job "+string(job.Kind)+" "+job.RunID)
			return nil
		},
		Sweep: func(context.Context) (service.SweepSummary, error) {
			got = append(got, "sweep")
			return service.SweepSummary{}, nil
		},
	}
	apigw, err := os.ReadFile("testdata/apigw-request.json")
	require.NoError(t, err)
	sched, err := os.ReadFile("testdata/scheduled-event.json")
	require.NoError(t, err)
	for _, raw := range [][]byte{apigw, sched, service.Job{Kind: service.JobResume, RunID: "r1"}.Payload()} {
		_, err := e.Handle(context.Background(), json.RawMessage(raw))
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"api POST /hello/world", "sweep", "job resume r1"}, got)
}

func TestHandleRefusesWhatAFunctionDoesNotServe(t *testing.T) {
	e := &Entry{Sweep: func(context.Context) (service.SweepSummary, error) { return service.SweepSummary{}, nil }}
	_, err := e.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: "r"}.Payload())
	assert.Error(t, err)
	_, err = e.Handle(context.Background(), json.RawMessage(`{"foo":1}`))
	assert.Error(t, err)
	_, err = e.Handle(context.Background(), json.RawMessage(`[`))
	assert.Error(t, err)
}

// TestHandleKeepsAJobsSnapshot: the row a job carries reaches the worker
// byte for byte, as the dispatcher encoded it.
func TestHandleKeepsAJobsSnapshot(t *testing.T) {
	var got service.Job
	e := &Entry{Worker: func(_ context.Context, job service.Job) error { got = job; return nil }}
	want := service.Job{Kind: service.JobRun, RunID: "r1",
		Snapshot: json.RawMessage(`{"id":"r1","status":"QUEUED","version":1,"request":{"prompt":"a \u003cb\u003e"}}`)}
	_, err := e.Handle(context.Background(), want.Payload())
	require.NoError(t, err)
	assert.Equal(t, want.Kind, got.Kind)
	assert.Equal(t, want.RunID, got.RunID)
	assert.Equal(t, string(want.Snapshot), string(got.Snapshot))
}
