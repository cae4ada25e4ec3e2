package service

import (
	"context"
	"encoding/json"
	"fmt"
)

// JobKind names what a worker job does.
type JobKind string

// The job kinds.
const (
	JobRun    JobKind = "run"
	JobResume JobKind = "resume"
)

// Job is the async event a worker Lambda receives: {"agentgate_job":{...}}.
type Job struct {
	Kind  JobKind `json:"kind"`
	RunID string  `json:"run_id"`
}

// JobEvent is the envelope of a Job in a Lambda invocation payload.
type JobEvent struct {
	Job *Job `json:"agentgate_job"`
}

// Payload returns the job's Lambda invocation payload.
func (j Job) Payload() []byte {
	b, _ := json.Marshal(JobEvent{Job: &j})
	return b
}

// Validate checks the job's kind and run id.
func (j Job) Validate() error {
	if j.Kind != JobRun && j.Kind != JobResume {
		return fmt.Errorf("unknown job kind %q", j.Kind)
	}
	if j.RunID == "" {
		return fmt.Errorf("job without run id")
	}
	return nil
}

// Dispatcher hands a job to a worker without waiting for it (on Lambda an
// async invoke; locally a goroutine). A lost dispatch is recovered by purge.
type Dispatcher interface {
	Dispatch(ctx context.Context, job Job) error
}

// DispatchFunc adapts a function to Dispatcher.
type DispatchFunc func(ctx context.Context, job Job) error

// Dispatch calls f.
func (f DispatchFunc) Dispatch(ctx context.Context, job Job) error { return f(ctx, job) }
