package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// JobKind names what a worker job does.
type JobKind string

// The job kinds.
const (
	JobRun    JobKind = "run"
	JobResume JobKind = "resume"
	// JobDeliver makes the first attempts of a run's due webhook
	// deliveries, nothing else: an API request whose write scheduled one
	// and that hands the run to no worker (a cancel of a waiting run)
	// dispatches it, so the receiver hears of it without waiting for the
	// sweep and the request without waiting for the receiver. Only a
	// function that may sign webhooks makes the attempts (app's
	// firstAttemptsAtJobEnd); any other worker leaves them to the sweep.
	JobDeliver JobKind = "deliver"
)

// MaxSnapshotSize bounds a job's snapshot (its JSON): a row whose encoding
// is larger (a run's start request can be large) is not carried, and its
// worker reads the run. It keeps a job's payload far below Lambda's limit
// for an async invoke.
const MaxSnapshotSize = 32 << 10

// SnapshotMaxAge is how far from the worker's clock the row in a job's
// snapshot may have been committed (its UpdatedAt) for the worker to claim
// from it: Lambda delivers a job again, with the same payload, minutes or
// hours after a failed invocation, and such a late job reads the run as a
// job without a snapshot does.
const SnapshotMaxAge = 10 * time.Second

// Job is the async event a worker Lambda receives: {"agentgate_job":{...}}.
type Job struct {
	Kind  JobKind `json:"kind"`
	RunID string  `json:"run_id"`
	// Snapshot, when set, is the run's row (the JSON of a runs.Run) as the
	// write made just before the dispatch committed it (NewJob): the worker
	// claims the run from it without reading it (runs.Store.ClaimSnapshot)
	// when it is fresh (SnapshotMaxAge), decodes strictly, is of this run
	// and waits for a worker; otherwise, and for jobs without one (the
	// sweep's), it reads the run. It is only a hint: the worker's first
	// write is conditional on the snapshot's status, version and write id,
	// so a stale one fails that write as a row read just before the change
	// would, and one that is not the stored row is never written over it;
	// one whose content no longer matches its write id (edited after its
	// write) is not claimed from at all (runs.SealWriteID).
	// It holds what the row holds (the start request, the held calls), as
	// the table does. Omitted when its JSON is over MaxSnapshotSize.
	Snapshot json.RawMessage `json:"snapshot,omitempty"`

	// row is a copy of the committed row Snapshot encodes and encoded is a
	// copy of those bytes: a worker in this process (dispatch.InProcess)
	// claims from a copy of row while Snapshot is still those bytes, and
	// does not decode them. Neither is sent (Payload carries Snapshot).
	row     *runs.Run
	encoded []byte
}

// NewJob returns a job of kind for the run whose row the caller has just
// committed (the row a runs.Store write returned), with that row as the
// job's snapshot when the row waits for a worker (QUEUED or RESUMING) and
// its JSON is at most MaxSnapshotSize. The job keeps a copy of the row for
// a worker in this process; Payload, which sends the job to another, sends
// the snapshot only if it decodes back to exactly the same row (the
// worker's writes then encode what the dispatcher's did).
func NewJob(kind JobKind, committed *runs.Run) Job {
	j := Job{Kind: kind}
	if committed == nil {
		return j
	}
	j.RunID = committed.ID
	if committed.Status != runs.StatusQueued && committed.Status != runs.StatusResuming {
		return j
	}
	b, err := json.Marshal(committed)
	if err != nil || len(b) > MaxSnapshotSize {
		return j
	}
	j.Snapshot = b
	j.row = committed.Clone()
	j.encoded = bytes.Clone(b)
	return j
}

// sendable reports whether the job's snapshot may go to a worker in
// another process: it decodes back to the row it was made from, the start
// request's bytes included, and encodes again to the same bytes. A job
// that did not come from NewJob is sent as it is.
func (j Job) sendable() bool {
	if j.row == nil || !bytes.Equal(j.Snapshot, j.encoded) {
		return true
	}
	back, err := decodeSnapshot(j.Snapshot)
	if err != nil || !bytes.Equal(back.Request, j.row.Request) {
		return false
	}
	again, err := json.Marshal(back)
	return err == nil && bytes.Equal(again, j.Snapshot)
}

// snapshotRow returns the job's snapshot as the row to claim from, or nil
// and why not (empty when the job has none): it must decode strictly, be
// of the job's run at a stored version, wait for a worker, and have been
// committed within SnapshotMaxAge of now (either side: clocks differ).
func (j Job) snapshotRow(now time.Time) (*runs.Run, string) {
	if len(j.Snapshot) == 0 {
		return nil, ""
	}
	var r *runs.Run
	var err error
	if j.row != nil && bytes.Equal(j.Snapshot, j.encoded) {
		r = j.row.Clone() // a job of this process: what the bytes encode
	} else {
		r, err = decodeSnapshot(j.Snapshot)
	}
	switch {
	case err != nil:
		return nil, "malformed: " + err.Error()
	case r.ID != j.RunID:
		return nil, "of another run"
	case r.Version < 1 || !r.Status.Valid():
		return nil, "not a stored row"
	case r.Status != runs.StatusQueued && r.Status != runs.StatusResuming:
		return nil, fmt.Sprintf("the run is %s in it", r.Status)
	case r.UpdatedAt.IsZero():
		return nil, "without its time"
	}
	if age := now.Sub(r.UpdatedAt); age > SnapshotMaxAge || age < -SnapshotMaxAge {
		return nil, fmt.Sprintf("taken %s ago", age.Round(time.Millisecond))
	}
	return r, ""
}

// decodeSnapshot decodes a snapshot's JSON strictly: one object with no
// field a runs.Run does not have.
func decodeSnapshot(b []byte) (*runs.Run, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	r := new(runs.Run)
	if err := dec.Decode(r); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the row")
	}
	return r, nil
}

// JobEvent is the envelope of a Job in a Lambda invocation payload.
type JobEvent struct {
	Job *Job `json:"agentgate_job"`
}

// Payload returns the job's Lambda invocation payload; it leaves out a
// snapshot that would not decode back to the row it was made from.
func (j Job) Payload() []byte {
	if !j.sendable() {
		j.Snapshot = nil
	}
	b, _ := json.Marshal(JobEvent{Job: &j})
	return b
}

// Validate checks the job's kind and run id.
func (j Job) Validate() error {
	if j.Kind != JobRun && j.Kind != JobResume && j.Kind != JobDeliver {
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
