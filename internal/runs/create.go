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
}

// Create stores a new QUEUED run with its run_started event. Codes:
// EInvalid, ETooLarge (approvers, request), EConflict (the id exists).
func (s *Store) Create(ctx context.Context, in NewRun) (*Run, error) {
	if in.ID == "" {
		in.ID = NewRunID()
	}
	if !ValidRunID(in.ID) {
		return nil, Errorf(EInvalid, "run id %q: use 1 to 64 letters, digits, '-' or '_'", in.ID)
	}
	if in.Initiator == "" {
		return nil, Errorf(EInvalid, "initiator is required")
	}
	if len(in.Approvers) > MaxApprovers {
		return nil, Errorf(ETooLarge, "%d approvers, at most %d allowed", len(in.Approvers), MaxApprovers)
	}
	for _, a := range in.Approvers {
		if a == "" {
			return nil, Errorf(EInvalid, "approvers must not be empty strings")
		}
	}
	if len(in.ToolExecutors) > MaxApprovers {
		return nil, Errorf(ETooLarge, "%d tool executors, at most %d allowed", len(in.ToolExecutors), MaxApprovers)
	}
	if slices.Contains(in.ToolExecutors, "") {
		return nil, Errorf(EInvalid, "tool executors must not be empty strings")
	}
	if len(in.Request) > MaxRequestSize {
		return nil, Errorf(ETooLarge, "the request is %d bytes as stored, over the %d-byte limit", len(in.Request), MaxRequestSize)
	}
	if err := checkJSON("request", in.Request, MaxRequestSize, true); err != nil {
		return nil, err
	}
	if in.Webhook != nil && (in.Webhook.URL == "" || len(in.Webhook.URL) > 2048 || len(in.Webhook.Events) > 16) {
		return nil, Errorf(EInvalid, "webhook: a URL of at most 2048 bytes and at most 16 event types")
	}
	if len(in.Purpose) > MaxPurposeBytes {
		return nil, Errorf(ETooLarge, "purpose: at most %d bytes", MaxPurposeBytes)
	}
	if len(in.Metadata) > MaxMetadataEntries {
		return nil, Errorf(ETooLarge, "metadata: at most %d entries", MaxMetadataEntries)
	}
	size := 0
	for k, v := range in.Metadata {
		size += len(k) + len(v)
	}
	if size > MaxMetadataBytes {
		return nil, Errorf(ETooLarge, "metadata: at most %d bytes of keys and values", MaxMetadataBytes)
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
	err := s.rows.Write(ctx, Write{Run: r, Create: true, Events: []Event{ev}})
	s.watch.changed(r.ID)
	if err != nil {
		if ErrorCode(err) == EConflict {
			if fresh, gerr := s.rows.GetRun(ctx, r.ID); gerr == nil && fresh.WriteID == r.WriteID {
				return r.Clone(), nil // our write landed; its response was lost
			}
			return nil, Errorf(EConflict, "run %s already exists", r.ID)
		}
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return r.Clone(), nil
}
