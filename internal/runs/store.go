package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Defaults for Options.
const (
	DefaultLeaseTTL      = 2 * time.Minute
	DefaultDispatchGrace = 2 * time.Minute
	DefaultRetention     = 720 * time.Hour
)

// maxRetries bounds how often a caller-intent transition (Decide, Cancel,
// Expire, RecordNotification) re-reads and retries when only the version
// moved under it.
const maxRetries = 4

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Now is the clock; time.Now when nil. Store truncates it to
	// milliseconds, the resolution every adapter keeps.
	Now func() time.Time
	// LeaseTTL is how long a claim or a renewal holds a run.
	LeaseTTL time.Duration
	// DispatchGrace is how long a QUEUED or RESUMING run may wait for its
	// worker before the due index hands it to purge for re-dispatch.
	DispatchGrace time.Duration
	// Retention is how long a terminal run is kept before purge deletes it.
	Retention time.Duration
	// Logger receives failures of best-effort cleanups; slog.Default when nil.
	Logger *slog.Logger
}

// Store applies the run life cycle on a RowStore and a StateStore. Every
// transition takes the run as the caller last read it and is written only if
// the stored row still has that status and version; the returned run is the
// new row. Methods are safe for concurrent use.
type Store struct {
	rows   RowStore
	states StateStore
	opts   Options
}

// NewStore returns a Store over the given adapters.
func NewStore(rows RowStore, states StateStore, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.DispatchGrace <= 0 {
		opts.DispatchGrace = DefaultDispatchGrace
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Store{rows: rows, states: states, opts: opts}
}

func (s *Store) now() time.Time { return ms(s.opts.Now()) }

// ms normalizes t to UTC milliseconds, the resolution every adapter keeps.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// NewRun is what Create needs to start a run.
type NewRun struct {
	// ID names the run; NewRunID() when empty.
	ID string
	// Initiator is the authenticated caller starting the run.
	Initiator string
	// Approvers may decide the run's suspensions.
	Approvers []string
	// Request is the opaque start request (JSON) the worker reads.
	Request json.RawMessage
}

// Create stores a new QUEUED run with its run_started event. Codes:
// EInvalid, EConflict (the id exists).
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
		return nil, Errorf(EInvalid, "%d approvers, at most %d allowed", len(in.Approvers), MaxApprovers)
	}
	for _, a := range in.Approvers {
		if a == "" {
			return nil, Errorf(EInvalid, "approvers must not be empty strings")
		}
	}
	if err := checkJSON("request", in.Request, MaxRequestSize, true); err != nil {
		return nil, err
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
		Request:   cloneRaw(in.Request),
		LastSeq:   1,
	}
	r.DueAt = s.dueAt(r)
	r.WriteID = newWriteID()
	ev := Event{RunID: r.ID, Seq: 1, Type: EventRunStarted, At: now, Actor: in.Initiator,
		Data: mustJSON(struct {
			Approvers []string `json:"approvers,omitempty"`
		}{r.Approvers})}
	if err := s.rows.Write(ctx, Write{Run: r, Create: true, Events: []Event{ev}}); err != nil {
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

// Get returns the run. Codes: ENotFound.
func (s *Store) Get(ctx context.Context, id string) (*Run, error) {
	if !ValidRunID(id) {
		return nil, Errorf(ENotFound, "run %q not found", id)
	}
	r, err := s.rows.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// Events returns up to limit (1 to 1000, default 100) events of the run with
// Seq > after, in order; pass the last Seq as after to read the next page.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	if !ValidRunID(runID) || after < 0 {
		return nil, nil
	}
	evs, err := s.rows.Events(ctx, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return evs, nil
}

// LookupToken returns the approval token with the given hash, used or
// expired alike (see ApprovalToken.Usable). Codes: ENotFound.
func (s *Store) LookupToken(ctx context.Context, hash string) (*ApprovalToken, error) {
	if !ValidTokenHash(hash) {
		return nil, Errorf(ENotFound, "approval link not found")
	}
	t, err := s.rows.Token(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("lookup token: %w", err)
	}
	return t, nil
}

// Due returns up to limit (default 100) runs whose next deadline (DueAt) is
// at or before now, and a cursor for the next page ("" at the end).
func (s *Store) Due(ctx context.Context, now time.Time, limit int, cursor string) ([]*Run, string, error) {
	if limit <= 0 {
		limit = 100
	}
	rs, next, err := s.rows.Due(ctx, ms(now), limit, cursor)
	if err != nil {
		return nil, "", fmt.Errorf("due runs: %w", err)
	}
	return rs, next, nil
}

// Claim moves a QUEUED or RESUMING run to RUNNING under a lease held by owner
// for LeaseTTL, appending a claimed (or resumed) event. A RUNNING run whose
// lease expired with no pending effect is taken over the same way (a
// reclaimed event). Of concurrent claimers exactly one wins. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) Claim(ctx context.Context, id, owner string) (*Run, error) {
	if owner == "" {
		return nil, Errorf(EInvalid, "lease owner is required")
	}
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	reclaim := cur.Status == StatusRunning && cur.LeaseExpired(now) && cur.PendingEffect == ""
	if cur.Status != StatusQueued && cur.Status != StatusResuming && !reclaim {
		return nil, Errorf(EConflict, "run %s is %s, not claimable", id, cur.Status)
	}
	next := cur.Clone()
	next.Status = StatusRunning
	next.LeaseOwner = owner
	next.LeaseUntil = now.Add(s.opts.LeaseTTL)
	typ := EventClaimed
	var data json.RawMessage
	switch {
	case reclaim:
		// The previous worker vanished with no write in flight; a new one
		// takes the run over (the sweep decides when that is safe).
		typ = EventReclaimed
		data = mustJSON(struct {
			PreviousOwner string `json:"previous_owner"`
		}{cur.LeaseOwner})
	case cur.Status == StatusResuming:
		typ = EventResumed
		data = mustJSON(struct {
			SuspensionID string `json:"suspension_id"`
		}{cur.SuspensionID})
	}
	return s.commit(ctx, cur, next, Write{Events: []Event{{Type: typ, Actor: owner, Data: data}}})
}

// Redispatch records that the worker of a QUEUED or RESUMING run was
// dispatched again (its first dispatch looked lost) and moves the run's due
// time DispatchGrace ahead, so the next sweep does not dispatch it again at
// once. Codes: ENotFound, EConflict (claimed or ended meanwhile).
func (s *Store) Redispatch(ctx context.Context, cur *Run, actor string) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	if cur.Status != StatusQueued && cur.Status != StatusResuming {
		return nil, Errorf(EConflict, "run %s is %s, not waiting for a worker", cur.ID, cur.Status)
	}
	if actor == "" {
		actor = "purge"
	}
	return s.commit(ctx, cur, cur.Clone(), Write{Events: []Event{{Type: EventRedispatched, Actor: actor}}})
}

// RenewLease extends owner's lease on a RUNNING run by LeaseTTL. Codes:
// EInvalid, ENotFound, EConflict (not RUNNING, not owner, stale version).
func (s *Store) RenewLease(ctx context.Context, cur *Run, owner string) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// RecordStep appends one step of the running loop as an event (its kind is
// the event type, the step its data) and renews owner's lease in one write.
// The tool_executed step of the fenced call clears the fence in the same
// write. Suspended, resumed and finished steps are refused: Suspend, Claim
// and Settle record those. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) RecordStep(ctx context.Context, cur *Run, owner string, st loop.Step) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	switch st.Kind {
	case "":
		return nil, Errorf(EInvalid, "step kind is required")
	case loop.StepSuspended, loop.StepResumed, loop.StepFinished:
		return nil, Errorf(EInvalid, "a %s step is recorded by the transition itself, not by RecordStep", st.Kind)
	}
	data, err := loop.MarshalJSON(st)
	if err != nil {
		return nil, Errorf(EInvalid, "step data: %v", err)
	}
	if err := checkJSON("step data", data, MaxEventDataSize, true); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	if st.Kind == loop.StepToolExecuted && st.CallID != "" && st.CallID == cur.PendingEffect {
		next.PendingEffect = ""
	}
	return s.commit(ctx, cur, next, Write{Events: []Event{{Type: string(st.Kind), Actor: owner, Data: data}}})
}

// MarkPendingEffect stamps the fence pending_effect=callID on owner's run
// before a write tool runs. Codes: EInvalid, ENotFound, EConflict (another
// effect is pending, or the lease guard fails).
func (s *Store) MarkPendingEffect(ctx context.Context, cur *Run, owner, callID string) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if callID == "" {
		return nil, Errorf(EInvalid, "call id is required")
	}
	if cur.PendingEffect != "" && cur.PendingEffect != callID {
		return nil, Errorf(EConflict, "run %s already has pending effect %q", cur.ID, cur.PendingEffect)
	}
	next := cur.Clone()
	next.PendingEffect = callID
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// ClearPendingEffect removes the fence for callID. Codes: EInvalid,
// ENotFound, EConflict.
func (s *Store) ClearPendingEffect(ctx context.Context, cur *Run, owner, callID string) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if callID == "" || cur.PendingEffect != callID {
		return nil, Errorf(EConflict, "run %s has no pending effect %q", cur.ID, callID)
	}
	next := cur.Clone()
	next.PendingEffect = ""
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// TokenGrant is one approval token issued with a suspension; only the
// SHA-256 of the raw token is given.
type TokenGrant struct {
	Hash     string
	Approver string
}

// Suspension is what Suspend records about a held turn: the loop's state and
// the approval window with its link tokens.
type Suspension struct {
	// State is the loop's suspended state. Its suspension id (which must
	// differ from the run's previous one), turn digest, pending calls and
	// counters go on the row; the whole state goes into a blob.
	State *loop.SuspendedState
	// Deadline is when the approval window closes (must be in the future).
	Deadline time.Time
	// RemindAt, when set and before Deadline, is when approvers get a reminder.
	RemindAt time.Time
	// Tokens are the approval-link tokens issued to approvers.
	Tokens []TokenGrant
}

// Suspend moves owner's RUNNING run to WAITING_FOR_APPROVAL: the state blob is
// put first (so a row never points at a missing blob), then one atomic write
// stores the row, the suspended event and the approval tokens. Codes:
// EInvalid (including state over MaxStateSize), ENotFound, EConflict.
func (s *Store) Suspend(ctx context.Context, cur *Run, owner string, sp Suspension) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	now := s.now()
	calls, blob, err := s.checkSuspension(cur, sp, now)
	if err != nil {
		return nil, err
	}
	if cur.PendingEffect != "" {
		return nil, Errorf(EConflict, "run %s has pending effect %q; record its result before suspending", cur.ID, cur.PendingEffect)
	}
	ref, err := s.states.PutState(ctx, cur.ID, blob)
	if err != nil {
		return nil, fmt.Errorf("suspend run %s: put state: %w", cur.ID, err)
	}
	st := sp.State
	deadline := ms(sp.Deadline)
	next := cur.Clone()
	next.Status = StatusWaiting
	next.SuspensionID = st.SuspensionID
	next.TurnDigest = st.TurnDigest
	next.PendingCalls = calls
	next.State = ref
	next.LeaseOwner, next.LeaseUntil = "", time.Time{}
	next.ApprovalDeadline = deadline
	next.RemindAt = ms(sp.RemindAt)
	next.ReminderSent = false
	next.Notification = NotificationPending
	next.Decision, next.DecidedBy, next.DecidedVia, next.DecidedAt = nil, "", "", time.Time{}
	next.Counters = st.Counters
	w := Write{}
	for _, g := range sp.Tokens {
		w.NewTokens = append(w.NewTokens, ApprovalToken{Hash: g.Hash, RunID: cur.ID, SuspensionID: st.SuspensionID, Approver: g.Approver, ExpiresAt: deadline})
		next.TokenHashes = append(next.TokenHashes, g.Hash)
	}
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	w.Events = []Event{{Type: EventSuspended, Actor: owner, Data: mustJSON(struct {
		SuspensionID string    `json:"suspension_id"`
		TurnDigest   string    `json:"turn_digest"`
		Calls        []string  `json:"calls"`
		Deadline     time.Time `json:"deadline"`
		StateSHA256  string    `json:"state_sha256"`
		StateSize    int64     `json:"state_size"`
	}{st.SuspensionID, st.TurnDigest, ids, deadline, ref.SHA256, ref.Size})}}
	// A failed write leaves an orphan blob under the run's prefix; purge
	// deletes the prefix with the run.
	return s.commit(ctx, cur, next, w)
}

// checkSuspension validates a suspension and returns the row's summary of
// its calls and the encoded state.
func (s *Store) checkSuspension(cur *Run, sp Suspension, now time.Time) ([]CallSummary, []byte, error) {
	st := sp.State
	if st == nil {
		return nil, nil, Errorf(EInvalid, "suspended state is required")
	}
	switch {
	case st.RunID != cur.ID:
		return nil, nil, Errorf(EInvalid, "suspended state is of run %q, not %s", st.RunID, cur.ID)
	case st.SuspensionID == "":
		return nil, nil, Errorf(EInvalid, "suspension id is required")
	case st.SuspensionID == cur.SuspensionID:
		return nil, nil, Errorf(EInvalid, "suspension id %q was already used by this run", st.SuspensionID)
	case st.TurnDigest == "":
		return nil, nil, Errorf(EInvalid, "turn digest is required")
	case len(st.PendingCalls) == 0:
		return nil, nil, Errorf(EInvalid, "a suspension needs at least one pending call")
	case len(st.PendingCalls) > MaxPendingCalls:
		return nil, nil, Errorf(EInvalid, "%d pending calls, at most %d allowed", len(st.PendingCalls), MaxPendingCalls)
	case !sp.Deadline.After(now):
		return nil, nil, Errorf(EInvalid, "approval deadline %s is not in the future", sp.Deadline.UTC().Format(time.RFC3339))
	case !sp.RemindAt.IsZero() && !sp.RemindAt.Before(sp.Deadline):
		return nil, nil, Errorf(EInvalid, "reminder must come before the approval deadline")
	}
	calls := SummarizeCalls(st)
	seen := map[string]bool{}
	for _, c := range calls {
		if c.ID == "" || c.Tool == "" {
			return nil, nil, Errorf(EInvalid, "pending calls need an id and a tool")
		}
		if seen[c.ID] {
			return nil, nil, Errorf(EInvalid, "pending call id %q appears twice", c.ID)
		}
		seen[c.ID] = true
		if err := checkJSON("pending call input", c.Input, MaxPendingCallsSize, true); err != nil {
			return nil, nil, err
		}
	}
	if b, _ := json.Marshal(calls); len(b) > MaxPendingCallsSize {
		return nil, nil, Errorf(EInvalid, "pending calls are %d bytes as JSON, over the %d-byte limit", len(b), MaxPendingCallsSize)
	}
	blob, err := st.Encode()
	if err != nil {
		return nil, nil, Errorf(EInvalid, "suspended state cannot be encoded: %v", err)
	}
	if len(sp.Tokens) > MaxApprovers {
		return nil, nil, Errorf(EInvalid, "%d approval tokens, at most %d allowed", len(sp.Tokens), MaxApprovers)
	}
	hashes := map[string]bool{}
	for _, g := range sp.Tokens {
		if !ValidTokenHash(g.Hash) {
			return nil, nil, Errorf(EInvalid, "approval token hash must be a lowercase hex sha-256")
		}
		if g.Approver == "" {
			return nil, nil, Errorf(EInvalid, "approval token needs an approver")
		}
		if hashes[g.Hash] || slices.Contains(cur.TokenHashes, g.Hash) {
			return nil, nil, Errorf(EInvalid, "approval token hash appears twice")
		}
		hashes[g.Hash] = true
	}
	return calls, blob, nil
}

// NewDecision is what Decide needs: a human's answer to one suspension,
// who gave it and how it arrived.
type NewDecision struct {
	// SuspensionID is the suspension decided on.
	SuspensionID string
	// Decider is the authenticated caller or, through a link, the token's
	// approver (filled in when empty).
	Decider string
	// Via is ViaAPI or ViaLink.
	Via string
	// Token is the looked-up approval token when Via is ViaLink; it is
	// consumed (single use) in the same write.
	Token *ApprovalToken
	// Decision is the answer the loop's Resume applies.
	Decision loop.Decision
}

// Decide moves a WAITING_FOR_APPROVAL run whose current suspension is
// d.SuspensionID to RESUMING, storing the decision, decider and channel with
// a decision event and, through a link, consuming the token, in one write.
// It is conditional on the suspension, not on the caller's copy being the
// latest: if only the version moved (say, a notification was recorded) it
// re-reads and retries. Of concurrent deciders exactly one wins. Whether the
// decider may decide is the caller's check. Codes: EInvalid, ENotFound,
// EConflict (decided, cancelled, other suspension, token used or bound
// elsewhere), EGone (approval window or link expired).
func (s *Store) Decide(ctx context.Context, cur *Run, d NewDecision) (*Run, error) {
	if d.Via == ViaLink {
		if d.Token == nil {
			return nil, Errorf(EInvalid, "a decision through a link needs its token")
		}
		if d.Decider == "" {
			d.Decider = d.Token.Approver
		}
		if d.Decider != d.Token.Approver {
			return nil, Errorf(EInvalid, "the decider of a link decision is the token's approver")
		}
	} else if d.Via != ViaAPI {
		return nil, Errorf(EInvalid, "decision channel %q: want %q or %q", d.Via, ViaAPI, ViaLink)
	}
	switch {
	case d.SuspensionID == "":
		return nil, Errorf(EInvalid, "suspension id is required")
	case d.Decider == "":
		return nil, Errorf(EInvalid, "decider is required")
	}
	if d.Decision.Action == "" && len(d.Decision.Calls) == 0 {
		return nil, Errorf(EInvalid, "the decision has neither a turn action nor per-call decisions")
	}
	body, err := loop.MarshalJSON(d.Decision)
	if err != nil {
		return nil, Errorf(EInvalid, "decision: %v", err)
	}
	if len(body) > MaxDecisionSize {
		return nil, Errorf(EInvalid, "decision is %d bytes, over the %d-byte limit", len(body), MaxDecisionSize)
	}
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status != StatusWaiting {
			return nil, Write{}, Errorf(EConflict, "run %s is %s, not waiting for approval", cur.ID, cur.Status)
		}
		if cur.SuspensionID != d.SuspensionID {
			return nil, Write{}, Errorf(EConflict, "run %s waits on suspension %s, not %s", cur.ID, cur.SuspensionID, d.SuspensionID)
		}
		if !now.Before(cur.ApprovalDeadline) {
			return nil, Write{}, Errorf(EGone, "the approval window of run %s closed at %s", cur.ID, cur.ApprovalDeadline.Format(time.RFC3339))
		}
		w := Write{Events: []Event{{Type: EventDecision, Actor: d.Decider, Data: mustJSON(DecisionEventData{
			SuspensionID: d.SuspensionID, TurnDigest: cur.TurnDigest, Via: d.Via, Decision: d.Decision,
		})}}}
		if d.Via == ViaLink {
			if d.Token.RunID != cur.ID || d.Token.SuspensionID != d.SuspensionID {
				return nil, Write{}, Errorf(EConflict, "approval link is for another suspension")
			}
			if err := d.Token.Usable(now); err != nil {
				return nil, Write{}, err
			}
			w.UseToken = &TokenUse{Hash: d.Token.Hash, RunID: cur.ID, SuspensionID: d.SuspensionID, At: now}
		}
		next := cur.Clone()
		next.Status = StatusResuming
		next.Decision = cloneDecision(&d.Decision)
		next.DecidedBy, next.DecidedVia, next.DecidedAt = d.Decider, d.Via, now
		return next, w, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusWaiting && fresh.SuspensionID == d.SuspensionID
	})
}

// Notice reports what happened when approvers were told about the current
// suspension.
type Notice struct {
	// SuspensionID is the suspension the notice is about.
	SuspensionID string
	// State is NotificationSent or NotificationFailed.
	State NotificationState
	// Reminder marks a reminder rather than the first notification.
	Reminder bool
	// Data is the event payload (JSON, optional): channels, recipients.
	Data json.RawMessage
	// RetryAt, with State NotificationFailed, brings the run's reminder time
	// forward so the sweep mails the approvers again soon (a retry then
	// takes the place of the reminder). Ignored when not before RemindAt.
	RetryAt time.Time
}

// RecordNotification stores the notification state of a waiting run with a
// notified (or reminded) event. Like Decide it retries when only the version
// moved. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) RecordNotification(ctx context.Context, cur *Run, n Notice) (*Run, error) {
	if n.State != NotificationSent && n.State != NotificationFailed {
		return nil, Errorf(EInvalid, "notification state %q: want %q or %q", n.State, NotificationSent, NotificationFailed)
	}
	if err := checkJSON("notice data", n.Data, MaxEventDataSize, true); err != nil {
		return nil, err
	}
	return s.retry(ctx, cur, func(cur *Run, _ time.Time) (*Run, Write, error) {
		if cur.Status != StatusWaiting || cur.SuspensionID != n.SuspensionID {
			return nil, Write{}, Errorf(EConflict, "run %s is not waiting on suspension %s", cur.ID, n.SuspensionID)
		}
		next := cur.Clone()
		next.Notification = n.State
		typ := EventNotified
		if n.Reminder {
			typ = EventReminded
			next.ReminderSent = true
		}
		if retry := ms(n.RetryAt); n.State == NotificationFailed && !retry.IsZero() && !next.ReminderSent &&
			retry.Before(next.ApprovalDeadline) && (next.RemindAt.IsZero() || retry.Before(next.RemindAt)) {
			next.RemindAt = retry
		}
		return next, Write{Events: []Event{{Type: typ, Data: cloneRaw(n.Data)}}}, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusWaiting && fresh.SuspensionID == n.SuspensionID
	})
}

// LoadState returns the suspended state the run's state ref points at,
// verified against its SHA-256; the run is never changed. Codes: ENotFound
// (the run has no state), EGone (blob missing), EInternal (corrupted).
func (s *Store) LoadState(ctx context.Context, r *Run) ([]byte, error) {
	if r.State.IsZero() {
		return nil, Errorf(ENotFound, "run %s has no suspended state", r.ID)
	}
	b, err := s.states.LoadState(ctx, r.State)
	if err != nil {
		return nil, fmt.Errorf("load state of run %s: %w", r.ID, err)
	}
	return b, nil
}

// Settlement is how a run ends, given to Settle.
type Settlement struct {
	// Status is StatusCompleted or StatusFailed.
	Status Status
	// Reason is the termination reason; loop.ReasonCompleted when empty and
	// Status is COMPLETED.
	Reason loop.TerminationReason
	// Output is the final output (JSON, optional).
	Output json.RawMessage
	// Counters, when set, are the run's final totals.
	Counters *loop.Counters
}

// Settle ends a RUNNING run as COMPLETED or FAILED, sets its retention and
// deletes its state blobs. The caller must hold the lease, or the lease must
// have expired (the sweeper settles those with owner ""). Codes: EInvalid,
// ENotFound, EConflict.
func (s *Store) Settle(ctx context.Context, cur *Run, owner string, o Settlement) (*Run, error) {
	if o.Status != StatusCompleted && o.Status != StatusFailed {
		return nil, Errorf(EInvalid, "settle status %q: want %s or %s", o.Status, StatusCompleted, StatusFailed)
	}
	if o.Reason == "" {
		if o.Status == StatusFailed {
			return nil, Errorf(EInvalid, "a failed run needs a termination reason")
		}
		o.Reason = loop.ReasonCompleted
	}
	if err := checkJSON("output", o.Output, MaxOutputSize, true); err != nil {
		return nil, err
	}
	now := s.now()
	if cur.Status != StatusRunning {
		return nil, Errorf(EConflict, "run %s is %s, not running", cur.ID, cur.Status)
	}
	if cur.LeaseOwner != owner && !cur.LeaseExpired(now) {
		return nil, Errorf(EConflict, "run %s is leased by another worker", cur.ID)
	}
	next := s.terminal(cur, o.Status, o.Reason, now)
	next.Output = cloneRaw(o.Output)
	if o.Counters != nil {
		next.Counters = *o.Counters
	}
	actor := owner
	if actor == "" {
		actor = "purge"
	}
	return s.finish(ctx, cur, next, Event{Type: EventSettled, Actor: actor, Data: mustJSON(struct {
		Status Status                 `json:"status"`
		Reason loop.TerminationReason `json:"reason"`
	}{o.Status, o.Reason})})
}

// Cancel ends any non-terminal run as CANCELLED and deletes its state blobs;
// a running worker finds out at its next write. It retries when only the
// version moved. Codes: EInvalid, ENotFound, EConflict (already terminal).
func (s *Store) Cancel(ctx context.Context, cur *Run, actor string) (*Run, error) {
	if actor == "" {
		return nil, Errorf(EInvalid, "actor is required")
	}
	r, err := s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status.Terminal() {
			return nil, Write{}, Errorf(EConflict, "run %s is already %s", cur.ID, cur.Status)
		}
		next := s.terminal(cur, StatusCancelled, loop.ReasonCancelled, now)
		return next, Write{Events: []Event{{Type: EventCancelled, Actor: actor}}}, nil
	}, func(fresh *Run) bool { return !fresh.Status.Terminal() })
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID)
	return r, nil
}

// Expire ends a WAITING_FOR_APPROVAL run whose approval deadline has passed
// as EXPIRED (reason approval_expired) and deletes its state blobs. Codes:
// ENotFound, EConflict (not waiting, or the deadline has not passed).
func (s *Store) Expire(ctx context.Context, cur *Run) (*Run, error) {
	suspension := cur.SuspensionID
	r, err := s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status != StatusWaiting || cur.SuspensionID != suspension {
			return nil, Write{}, Errorf(EConflict, "run %s is %s, not waiting for approval", cur.ID, cur.Status)
		}
		if now.Before(cur.ApprovalDeadline) {
			return nil, Write{}, Errorf(EConflict, "the approval window of run %s is still open", cur.ID)
		}
		next := s.terminal(cur, StatusExpired, loop.ReasonApprovalExpired, now)
		return next, Write{Events: []Event{{Type: EventExpired, Actor: "purge", Data: mustJSON(struct {
			SuspensionID string `json:"suspension_id"`
		}{cur.SuspensionID})}}}, nil
	}, func(fresh *Run) bool { return fresh.Status == StatusWaiting && fresh.SuspensionID == suspension })
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID)
	return r, nil
}

// Purge deletes a terminal run: its state blobs (the whole prefix), then its
// row, events and tokens. Purging a run that no longer exists deletes any
// blobs left under its prefix and succeeds. Codes: EConflict (not terminal).
func (s *Store) Purge(ctx context.Context, id string) error {
	if !ValidRunID(id) {
		return Errorf(EInvalid, "run id %q is not valid", id)
	}
	r, err := s.rows.GetRun(ctx, id)
	switch {
	case ErrorCode(err) == ENotFound:
		r = &Run{ID: id, Status: StatusCompleted}
	case err != nil:
		return fmt.Errorf("purge run %s: %w", id, err)
	case !r.Status.Terminal():
		return Errorf(EConflict, "run %s is %s; only terminal runs are purged", id, r.Status)
	}
	// Blobs first: if the row delete then fails, the run stays in the due
	// index and the next sweep retries.
	if err := s.states.DeleteRunStates(ctx, id); err != nil {
		return fmt.Errorf("purge run %s: delete blobs: %w", id, err)
	}
	if err := s.rows.DeleteRun(ctx, id, r.TokenHashes); err != nil {
		return fmt.Errorf("purge run %s: delete rows: %w", id, err)
	}
	return nil
}

// terminal returns cur moved to a terminal status at now.
func (s *Store) terminal(cur *Run, st Status, reason loop.TerminationReason, now time.Time) *Run {
	next := cur.Clone()
	next.Status = st
	next.Reason = reason
	next.LeaseOwner, next.LeaseUntil = "", time.Time{}
	next.State = StateRef{}
	next.RetainUntil = now.Add(s.opts.Retention)
	return next
}

// finish commits a terminal transition and then deletes the state blobs.
func (s *Store) finish(ctx context.Context, cur, next *Run, ev Event) (*Run, error) {
	r, err := s.commit(ctx, cur, next, Write{Events: []Event{ev}})
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID)
	return r, nil
}

// dropStates deletes a settled run's blobs, best effort: what remains is
// deleted with the run's prefix at purge.
func (s *Store) dropStates(ctx context.Context, id string) {
	if err := s.states.DeleteRunStates(ctx, id); err != nil {
		s.opts.Logger.WarnContext(ctx, "delete state blobs of a settled run", "run_id", id, "err", err)
	}
}

// guardLease refuses unless cur is RUNNING under owner's lease.
func (s *Store) guardLease(cur *Run, owner string) error {
	if owner == "" {
		return Errorf(EInvalid, "lease owner is required")
	}
	if cur == nil {
		return Errorf(EInvalid, "run is required")
	}
	if cur.Status != StatusRunning {
		return Errorf(EConflict, "run %s is %s, not running", cur.ID, cur.Status)
	}
	if cur.LeaseOwner != owner {
		return Errorf(EConflict, "run %s is not leased by %s", cur.ID, owner)
	}
	return nil
}

// dueAt is the run's next deadline, the sort key of the due index.
func (s *Store) dueAt(r *Run) time.Time {
	switch r.Status {
	case StatusQueued, StatusResuming:
		return r.UpdatedAt.Add(s.opts.DispatchGrace)
	case StatusRunning:
		return r.LeaseUntil
	case StatusWaiting:
		if !r.RemindAt.IsZero() && !r.ReminderSent {
			return r.RemindAt
		}
		return r.ApprovalDeadline
	default:
		return r.RetainUntil
	}
}

// commit writes next in place of cur (conditional on cur's status and
// version) with w's events numbered after cur.LastSeq.
func (s *Store) commit(ctx context.Context, cur, next *Run, w Write) (*Run, error) {
	r, _, err := s.write(ctx, cur, next, w)
	return r, err
}

// write is commit that also returns the run as read back after a refused
// write (nil otherwise).
func (s *Store) write(ctx context.Context, cur, next *Run, w Write) (*Run, *Run, error) {
	if !ValidRunID(cur.ID) {
		return nil, nil, Errorf(ENotFound, "run %q not found", cur.ID)
	}
	if next.Status != cur.Status && !CanTransition(cur.Status, next.Status) {
		return nil, nil, Errorf(EConflict, "run %s cannot go from %s to %s", cur.ID, cur.Status, next.Status)
	}
	now := s.now()
	next.Version = cur.Version + 1
	next.UpdatedAt = now
	next.DueAt = s.dueAt(next)
	next.WriteID = newWriteID()
	for i := range w.Events {
		next.LastSeq++
		w.Events[i].RunID = cur.ID
		w.Events[i].Seq = next.LastSeq
		w.Events[i].At = now
	}
	w.Run = next
	w.ExpectStatus = cur.Status
	w.ExpectVersion = cur.Version
	if err := s.rows.Write(ctx, w); err != nil {
		fresh, err := s.explain(ctx, cur, w, err)
		if fresh != nil && fresh.WriteID == next.WriteID {
			// Our own write landed and only its response was lost (an SDK
			// retry then failed its condition): that is success.
			return next.Clone(), nil, nil
		}
		return nil, fresh, err
	}
	return next.Clone(), nil, nil
}

// explain turns a failed conditional write into the error the caller needs,
// reading the run (and token) back; it also returns the fresh run, if any.
func (s *Store) explain(ctx context.Context, cur *Run, w Write, err error) (*Run, error) {
	if ErrorCode(err) != EConflict {
		return nil, fmt.Errorf("write run %s: %w", cur.ID, err)
	}
	fresh, gerr := s.rows.GetRun(ctx, cur.ID)
	switch {
	case ErrorCode(gerr) == ENotFound:
		return nil, Errorf(ENotFound, "run %s not found", cur.ID)
	case gerr != nil:
		return nil, fmt.Errorf("write run %s: %w (re-read: %v)", cur.ID, err, gerr)
	case fresh.Version != cur.Version || fresh.Status != cur.Status:
		return fresh, Errorf(EConflict, "run %s changed meanwhile: now %s at version %d, not %s at version %d",
			cur.ID, fresh.Status, fresh.Version, cur.Status, cur.Version)
	}
	if w.UseToken != nil {
		t, terr := s.rows.Token(ctx, w.UseToken.Hash)
		switch {
		case ErrorCode(terr) == ENotFound:
			return fresh, Errorf(ENotFound, "approval link not found")
		case terr == nil:
			if uerr := t.Usable(w.UseToken.At); uerr != nil {
				return fresh, uerr
			}
			if t.RunID != w.UseToken.RunID || t.SuspensionID != w.UseToken.SuspensionID {
				return fresh, Errorf(EConflict, "approval link is for another suspension")
			}
		}
	}
	return fresh, Errorf(EConflict, "run %s: write refused: %s", cur.ID, ErrorMessage(err))
}

// retry runs a caller-intent transition: build computes the next row from
// the latest run; when the write fails only because the version moved and
// again(fresh) still holds, it runs again on the fresh row.
func (s *Store) retry(ctx context.Context, cur *Run, build func(cur *Run, now time.Time) (*Run, Write, error), again func(fresh *Run) bool) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	for attempt := 0; ; attempt++ {
		next, w, err := build(cur, s.now())
		if err != nil {
			return nil, err
		}
		r, fresh, err := s.write(ctx, cur, next, w)
		if err == nil || ErrorCode(err) != EConflict || attempt == maxRetries {
			return r, err
		}
		if fresh == nil || fresh.Version == cur.Version || !again(fresh) {
			return nil, err
		}
		cur = fresh
	}
}
