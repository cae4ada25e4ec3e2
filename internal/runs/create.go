package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// NewRun is what Create needs to start a run.
type NewRun struct {
	// ID names the run; NewRunID() when empty.
	ID string
	// Initiator is the authenticated caller starting the run.
	Initiator string
	// InitiatorPerson and InitiatorKeys are who the initiator is in the
	// directory (Run.InitiatorPerson, Run.InitiatorKeys: SubjectKey when
	// a person, and PersonKeys).
	InitiatorPerson string
	InitiatorKeys   []string
	// Approvers may decide the run's suspensions.
	Approvers []string
	// FourEyes, Purpose and Metadata are copied to the run (see Run).
	FourEyes bool
	Purpose  string
	Metadata map[string]string
	// Request is the opaque start request (JSON) the worker reads.
	Request json.RawMessage
	// Webhook is where the caller is told about the run (nil: nowhere).
	Webhook *Subscription
	// ToolExecutors may submit client-tool results besides the initiator
	// (principals and "group:<name>" groups, as named).
	ToolExecutors []string
	// IdempotencyKey, when set, is the initiator's key for this start
	// (ValidIdempotencyKey): the run is created only if no run the
	// initiator started under the key is stored, and the key is stored in
	// the same write. RequestSHA256 is the digest of the request the key
	// came with (required with a key): a later start under the key with
	// the same digest gets the run, one with another digest is refused.
	IdempotencyKey string
	RequestSHA256  string
}

// Create stores a new QUEUED run with its run_started event, as Start
// does, and returns it (or, under an idempotency key that started a run
// of the same request, that run). Codes as Start.
func (s *Store) Create(ctx context.Context, in NewRun) (*Run, error) {
	r, _, err := s.Start(ctx, in)
	return r, err
}

// Start stores a new QUEUED run with its run_started event and returns it.
// Under an idempotency key (NewRun.IdempotencyKey) that the initiator
// started a run of the same request with (RequestSHA256), it stores
// nothing and returns that run as it is now, with replayed true; of
// concurrent starts under one key exactly one creates a run. A start with
// no key writes nothing more than the run and its event. Codes: EInvalid
// (the input; a key that started a run of another request, the message
// naming the run), ETooLarge (approvers, request), EConflict (the id
// exists; another start under the key was still being written after a few
// tries).
func (s *Store) Start(ctx context.Context, in NewRun) (r *Run, replayed bool, err error) {
	r, w, err := s.newRun(in)
	if err != nil {
		return nil, false, err
	}
	if w.IdempotencyKey != nil {
		return s.startKeyed(ctx, in, r, w)
	}
	err = s.rows.Write(ctx, w)
	s.watch.changed(r.ID)
	if err != nil {
		if ErrorCode(err) == EConflict {
			if fresh, gerr := s.rows.GetRun(ctx, r.ID); gerr == nil && fresh.WriteID == r.WriteID {
				return r.Clone(), false, nil // our write landed; its response was lost
			}
			return nil, false, Errorf(EConflict, "run %s already exists", r.ID)
		}
		return nil, false, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return r.Clone(), false, nil
}

// newRun validates in and returns the new run and the write that creates
// it.
func (s *Store) newRun(in NewRun) (*Run, Write, error) {
	if in.ID == "" {
		in.ID = NewRunID()
	}
	if !ValidRunID(in.ID) {
		return nil, Write{}, Errorf(EInvalid, "run id %q: use 1 to 64 letters, digits, '-' or '_'", in.ID)
	}
	if in.Initiator == "" {
		return nil, Write{}, Errorf(EInvalid, "initiator is required")
	}
	if len(in.Approvers) > MaxApprovers {
		return nil, Write{}, Errorf(ETooLarge, "%d approvers, at most %d allowed", len(in.Approvers), MaxApprovers)
	}
	for _, a := range in.Approvers {
		if a == "" {
			return nil, Write{}, Errorf(EInvalid, "approvers must not be empty strings")
		}
	}
	if len(in.ToolExecutors) > MaxApprovers {
		return nil, Write{}, Errorf(ETooLarge, "%d tool executors, at most %d allowed", len(in.ToolExecutors), MaxApprovers)
	}
	if slices.Contains(in.ToolExecutors, "") {
		return nil, Write{}, Errorf(EInvalid, "tool executors must not be empty strings")
	}
	if len(in.Request) > MaxRequestSize {
		return nil, Write{}, Errorf(ETooLarge, "the request is %d bytes as stored, over the %d-byte limit", len(in.Request), MaxRequestSize)
	}
	if err := checkJSON("request", in.Request, MaxRequestSize, true); err != nil {
		return nil, Write{}, err
	}
	if in.Webhook != nil && (in.Webhook.URL == "" || len(in.Webhook.URL) > 2048 || len(in.Webhook.Events) > 16) {
		return nil, Write{}, Errorf(EInvalid, "webhook: a URL of at most 2048 bytes and at most 16 event types")
	}
	if len(in.Purpose) > MaxPurposeBytes {
		return nil, Write{}, Errorf(ETooLarge, "purpose: at most %d bytes", MaxPurposeBytes)
	}
	if len(in.Metadata) > MaxMetadataEntries {
		return nil, Write{}, Errorf(ETooLarge, "metadata: at most %d entries", MaxMetadataEntries)
	}
	size := 0
	for k, v := range in.Metadata {
		size += len(k) + len(v)
	}
	if size > MaxMetadataBytes {
		return nil, Write{}, Errorf(ETooLarge, "metadata: at most %d bytes of keys and values", MaxMetadataBytes)
	}
	if in.IdempotencyKey != "" && !ValidIdempotencyKey(in.IdempotencyKey) {
		return nil, Write{}, Errorf(EInvalid, "idempotency key: 1 to %d visible ASCII characters ('!' to '~')", MaxIdempotencyKeyBytes)
	}
	if in.IdempotencyKey != "" && in.RequestSHA256 == "" {
		return nil, Write{}, Errorf(EInvalid, "an idempotency key needs the digest of its request")
	}
	now := s.now()
	r := &Run{
		ID:        in.ID,
		Status:    StatusQueued,
		Version:   1,
		CreatedAt: now,
		UpdatedAt: now,
		Initiator: in.Initiator,
		Approvers: slices.Clone(in.Approvers),
		FourEyes:  in.FourEyes,
		Purpose:   in.Purpose,
		Request:   cloneRaw(in.Request),
		Webhook:   cloneSubscription(in.Webhook),
		LastSeq:   1,
	}
	if len(in.ToolExecutors) > 0 {
		r.ToolExecutors = slices.Clone(in.ToolExecutors)
	}
	if strings.HasPrefix(in.InitiatorPerson, "person:") {
		r.InitiatorPerson = in.InitiatorPerson
	}
	if len(in.InitiatorKeys) > 0 {
		r.InitiatorKeys = slices.Clone(in.InitiatorKeys[:min(len(in.InitiatorKeys), MaxVoteKeys)])
	}
	if len(in.Metadata) > 0 {
		r.Metadata = maps.Clone(in.Metadata)
	}
	r.DueAt = s.dueAt(r)
	SealWriteID(r)
	ev := Event{RunID: r.ID, Seq: 1, Type: EventRunStarted, At: now, Actor: in.Initiator,
		Data: mustJSON(struct {
			Approvers     []string `json:"approvers,omitempty"`
			FourEyes      bool     `json:"four_eyes,omitempty"`
			ToolExecutors []string `json:"tool_executors,omitempty"`
		}{r.Approvers, r.FourEyes, r.ToolExecutors})}
	w := Write{Run: r, Create: true, Events: []Event{ev}}
	if in.IdempotencyKey != "" {
		w.IdempotencyKey = &IdempotencyKey{
			Hash: IdempotencyKeyHash(in.Initiator, in.IdempotencyKey), RunID: r.ID,
			RequestSHA256: in.RequestSHA256, CreatedAt: now,
		}
	}
	return r, w, nil
}
