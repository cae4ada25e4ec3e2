package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/runs"
)

// MailRetryDelay is how soon the sweep mails approvers again after the
// first approval mail of a suspension failed.
const MailRetryDelay = time.Minute

// DefaultQuorumCheckEvery is how often, by default, the sweep checks that
// a waiting run's held calls can still get their approvals from the
// directory in force (Sweeper.checkQuorum): the first check this long
// after the suspension, then this long after each check. A run is ended
// by the second check in a row that finds its approval impossible, so it
// waits on approvers at most twice this long after a change to the
// directory made it so (unless its deadline comes first), and a change put
// right within this long after a check found it ends nothing. The
// interval is Worker.QuorumCheckEvery and Sweeper.QuorumCheckEvery
// (AGENTGATE_QUORUM_CHECK_EVERY, serve --quorum-check-every), from
// MinQuorumCheckEvery to MaxQuorumCheckEvery.
const DefaultQuorumCheckEvery = time.Hour

// The bounds of a configured quorum check interval: a check more often
// than each second would only make the sweep check in a loop (a test that
// wants checks soon sets a second), and one a day apart is as slow as a
// directory mistake may be left to end runs.
const (
	MinQuorumCheckEvery = time.Second
	MaxQuorumCheckEvery = 24 * time.Hour
)

// quorumCheckEvery is every, or DefaultQuorumCheckEvery when every is not
// positive.
func quorumCheckEvery(every time.Duration) time.Duration {
	if every > 0 {
		return every
	}
	return DefaultQuorumCheckEvery
}

// DefaultDeadlineMargin is how long before its context's deadline (a
// Lambda's timeout) a segment stops starting model and tool calls and
// checkpoints the run, which goes on in a new invocation.
const DefaultDeadlineMargin = 2 * time.Minute

// DefaultDeadlineReserve is kept free at the end of a context with a
// deadline: a model or tool call still running then is abandoned (and made
// again by the next segment when that is safe, or, when it was the
// segment's first call, ends as an error result), so the worker can still
// record it and write the checkpoint.
const DefaultDeadlineReserve = 20 * time.Second

// Checkpoint causes, recorded in the checkpointed event.
const (
	causeSegmentBudget = "segment_budget"
	causeDeadline      = "deadline"
)

// Notification asks for one approver to be told about a suspension.
type Notification struct {
	Run      *runs.Run
	Approver string
	// RawToken is the approval-link token (only its hash is stored).
	RawToken string
	Purpose  string
	Reminder bool
}

// Notifier tells an approver (by e-mail, or into a local outbox).
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, n Notification) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, n Notification) error { return f(ctx, n) }

// Worker executes run and resume jobs: it claims the run with a lease, runs
// the loop with every step persisted as an event (with the segment's next
// write: runs.Store.AddStep) and every write fenced,
// then suspends (state blob, row, tokens; then approvers are told), settles,
// or, when its time is up, checkpoints the run and dispatches its next
// segment.
type Worker struct {
	Store  *runs.Store
	Runner func(opts loop.Hooks) *loop.Runner
	// NewToken returns a raw approval token and its SHA-256 hash.
	NewToken func() (raw, hash string, err error)
	// Notifier tells e-mail approvers; nil: approvers use the API only.
	Notifier    Notifier
	ApprovalTTL time.Duration
	// ToolResultsTTL is the default window for client-tool results
	// (DefaultToolResultsTTL when zero).
	ToolResultsTTL time.Duration
	// Directory says who is who (persons, groups, service accounts); nil:
	// every principal is only itself, compared canonically.
	Directory *identity.Directory
	// QuorumChecks, with a Directory, has each suspension schedule the
	// sweep's quorum checks (Run.QuorumCheckAt: QuorumCheckEvery after the
	// hold; the sweep schedules the later ones by its own interval). Off: none is scheduled (the sweep still
	// checks a run that has one). On for the local server; on AWS,
	// AGENTGATE_QUORUM_CHECK, off by default in this release: a release
	// before it, still running during a deploy or after a rollback, takes a
	// run due at its check for one due its reminder (see README).
	QuorumChecks bool
	// QuorumCheckEvery is how long after a hold its first quorum check
	// comes (0: DefaultQuorumCheckEvery); give the Sweeper the same.
	QuorumCheckEvery time.Duration
	// Policy is the deployment policy (nil: no rules; the tools' own
	// triggers decide, and writes need approval).
	Policy *policy.Policy
	// Owner prefixes lease owners (e.g. the function instance).
	Owner string
	// Dispatch hands a checkpointed run's next segment to a worker, as a
	// job of the kind this worker was given (nil: the sweep re-dispatches
	// it after the dispatch grace).
	Dispatch Dispatcher
	// SegmentBudget, when positive, is how long one segment may work, by
	// the worker's clock, before it checkpoints the run and dispatches the
	// next segment (serve --segment-budget; tests make it tiny).
	SegmentBudget time.Duration
	// DeadlineMargin is how long before its context's deadline a segment
	// stops starting model and tool calls and checkpoints (0:
	// DefaultDeadlineMargin).
	DeadlineMargin time.Duration
	// DeadlineReserve is how long before its context's deadline a model or
	// tool call still running is abandoned (0: DefaultDeadlineReserve).
	DeadlineReserve time.Duration
	// Heartbeat is how often, while the loop runs, the worker checks its
	// lease and renews it once less than half of it is left: a model or
	// tool call longer than the lease records no step that would renew it
	// (0: a quarter of the store's lease).
	Heartbeat time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) log() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}

// Handle executes one job. A job whose run is not claimable (already taken,
// settled, cancelled) is a no-op, so a duplicated dispatch is harmless. The
// error is non-nil only when the run could not be brought to a durable state.
func (w *Worker) Handle(ctx context.Context, job Job) error {
	if err := job.Validate(); err != nil {
		return err
	}
	log := w.log().With("run_id", job.RunID, "job", job.Kind)
	if job.Kind == JobDeliver {
		log.InfoContext(ctx, "deliver job: this worker sends no webhooks; the sweep makes the attempts")
		return nil
	}
	owner := fmt.Sprintf("%s/%s", w.Owner, randomHex(6))
	// The claim is written with the segment's first write: a run worker
	// that reads and suspends writes once, and one whose job carries a
	// fresh snapshot of the row does not read it either.
	cur, fromSnapshot, err := w.claim(ctx, job, owner, log)
	switch runs.ErrorCode(err) {
	case "":
	case runs.EConflict, runs.ENotFound:
		log.InfoContext(ctx, "job skipped: run not claimable", "reason", runs.ErrorMessage(err))
		return nil
	default:
		return fmt.Errorf("claim run %s: %w", job.RunID, err)
	}
	log.InfoContext(ctx, "claimed run", "claim_written", !cur.UnwrittenClaim(), "from_snapshot", fromSnapshot)
	seg := &segmentRun{w: w, cur: cur, owner: owner, log: log, job: job, started: w.now(), outer: ctx}
	seg.claimBy = w.claimBy(cur, seg.started)
	var req StartRequest
	if err := json.Unmarshal(cur.Request, &req); err != nil {
		return seg.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, "the stored start request cannot be read", nil)
	}
	seg.req = &req
	seg.ttl = req.ApprovalTTL(w.approvalTTL())
	loopCtx, cancel := seg.loopContext(ctx)
	defer cancel()
	runner := w.Runner(seg.hooks())
	runner.Policy = runPolicy(w.Policy, w.Directory, cur, &req, log)
	runner.Unapprovable = unapprovable(w.Directory, cur)
	// A fence on the row when the segment starts is one a vanished worker
	// left (this one stamps its own later): a resume taken over may be one
	// that worker began and got as far as the fenced call, so the turn's
	// idempotent writes up to it are made again as they were, not judged
	// again by the policy (loop.Runner.TakenOverAt). One that vanished
	// with no fence stamped began no write of the turn (each is fenced
	// first, in a write of its own): the policy judges every call. (Unless
	// a fence was lifted with no checkpoint stored: a later write that
	// changed nothing, or a heartbeat that could not store its checkpoint;
	// a write made before it is then judged as if not made, see README.)
	runner.TakenOverAt = cur.PendingEffect
	if runner.Tools, err = req.Toolbox(runner.Tools); err != nil {
		// The deployment now has a tool of a client tool's name: the run's
		// tools are no longer what it was started (and approved) with.
		return seg.settle(ctx, runs.StatusFailed, loop.ReasonToolChanged, "client tools: "+err.Error(), nil)
	}
	stopHeartbeat := seg.heartbeat(loopCtx)
	// Also when the loop panics: aws-lambda-go recovers a handler's panic
	// and the process lives on, so a heartbeat left running would renew the
	// lease of a segment that is gone and keep the sweep from handing the
	// run to a new worker.
	defer stopHeartbeat()

	var out loop.Outcome
	// The run's row says how to continue, whichever job brought us here
	// (a reclaimed run may have lost either kind of worker): from its
	// checkpoint, from its suspended state with the decision, or from the
	// start request.
	switch {
	case !cur.Checkpoint.IsZero():
		out, err = seg.continueRun(loopCtx, runner)
	case jobKind(cur) == JobResume:
		out, err = seg.resume(loopCtx, runner)
	default:
		out, err = runner.Run(loopCtx, req.LoopRequest(cur.ID))
	}
	stopHeartbeat()
	// The loop's time (the job's deadline less the reserve) ran out while
	// it was under way: a call under way then did not return in time.
	seg.timeUp = errors.Is(loopCtx.Err(), context.DeadlineExceeded)
	if err != nil {
		return seg.fail(ctx, err, out)
	}
	return seg.finish(ctx, out)
}

// claim claims the job's run for owner: from the job's snapshot when it is
// fresh and claimable (runs.Store.ClaimSnapshot: no read), otherwise, and
// on any doubt about the snapshot, by reading the run
// (runs.Store.ClaimOnWrite). A stale snapshot costs what a row read just
// before the run changed costs: the segment's first write is conditional
// on its version and fails, and the worker stops.
func (w *Worker) claim(ctx context.Context, job Job, owner string, log *slog.Logger) (cur *runs.Run, fromSnapshot bool, err error) {
	snap, why := job.snapshotRow(w.now())
	if snap != nil {
		cur, err := w.Store.ClaimSnapshot(snap, owner)
		if err == nil {
			return cur, true, nil
		}
		if errors.Is(err, runs.ErrSnapshotAltered) {
			// Someone edited the job (or a deploy is under way): worth
			// seeing, as a forged decision would be.
			log.WarnContext(ctx, "job's snapshot does not match its write id; reading the run", "job", job.Kind)
			return w.claimByReading(ctx, job, owner)
		}
		why = runs.ErrorMessage(err)
	}
	if why != "" {
		log.InfoContext(ctx, "snapshot not used; reading the run", "why", why)
	}
	return w.claimByReading(ctx, job, owner)
}

func (w *Worker) claimByReading(ctx context.Context, job Job, owner string) (*runs.Run, bool, error) {
	cur, err := w.Store.ClaimOnWrite(ctx, job.RunID, owner)
	return cur, false, err
}

// claimBy is when a segment that started at started must have written its
// claim of cur: half of the shorter of the dispatch grace and the lease
// after it started, and earlier when the run is due for re-dispatch
// sooner (a late dispatch).
func (w *Worker) claimBy(cur *runs.Run, started time.Time) time.Time {
	window := min(w.Store.DispatchGrace(), w.Store.LeaseTTL())
	by := started.Add(window / 2)
	if due := cur.DueAt.Add(-window / 4); !cur.DueAt.IsZero() && due.Before(by) {
		by = due
	}
	return by
}

func (w *Worker) toolResultsTTL() time.Duration {
	if w.ToolResultsTTL > 0 {
		return w.ToolResultsTTL
	}
	return DefaultToolResultsTTL
}

func (w *Worker) approvalTTL() time.Duration {
	if w.ApprovalTTL > 0 {
		return w.ApprovalTTL
	}
	return DefaultApprovalTTL
}

// segmentRun is one claimed run being executed.
type segmentRun struct {
	w *Worker
	// mu guards cur while the heartbeat runs beside the loop.
	mu    sync.Mutex
	cur   *runs.Run
	owner string
	log   *slog.Logger
	req   *StartRequest
	ttl   time.Duration
	// job is the job this worker was given; the next segment is
	// dispatched as the same kind (to the same function).
	job Job
	// started is when the segment began, by the worker's clock.
	started time.Time
	// deadline is the context's deadline (zero: none).
	deadline time.Time
	// outer is the job's context: the loop's ends DeadlineReserve earlier,
	// and the hooks record what the loop did in the reserve.
	outer context.Context
	// cause says why the segment yielded.
	cause string
	// settled is set when resume already ended the run (refused state).
	settled bool
	// timeUp is set when the loop's context's deadline (the worker's
	// time, less DeadlineReserve) had passed when the loop returned: a
	// write it left fenced did not return in time.
	timeUp bool
	// durable holds the idempotency keys of the calls not done yet that
	// the run's stored position (its checkpoint, or its suspended state)
	// reaches: a new worker makes them again under the same keys. Keys, not
	// call ids: a model may reuse a call id in a later turn, which the
	// stored position does not reach. Guarded by mu, like effect: the
	// heartbeat changes both.
	durable map[string]bool
	// claimBy is when the heartbeat writes a claim the segment has not
	// written yet, so that the sweep never re-dispatches a run whose
	// worker is alive.
	claimBy time.Time
	// effect is the checkpoint of the write call whose result is in and
	// whose tool_executed step is not written yet: the heartbeat stores it
	// with the steps when it must renew the lease before the segment's
	// next write (SaveProgress), so a new worker continues after the write.
	// Guarded by mu.
	effect *effectRecord
	// fenced is the write call whose fence this segment stamped last: the
	// detail of a run that ends with its fence still stamped names it.
	fenced loop.PendingCall
}

// effectRecord is a write's result whose tool_executed step is not written yet.
type effectRecord struct {
	callID     string
	checkpoint []byte
	// remaining are the keys of the calls the checkpoint reaches.
	remaining map[string]bool
	// added is set once the call's tool_executed step is added to the
	// segment's unwritten steps.
	added bool
}

// errLeaseLost marks a hook failure because another worker or a cancel took the run.
var errLeaseLost = errors.New("lease lost")

// loopContext returns the context the loop runs in: with a deadline, the
// loop's model and tool calls end DeadlineReserve before it, so the
// checkpoint can still be written.
func (s *segmentRun) loopContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	s.deadline = dl
	reserve := s.w.DeadlineReserve
	if reserve <= 0 {
		reserve = DefaultDeadlineReserve
	}
	cut := dl.Add(-reserve)
	if time.Until(cut) <= 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, cut)
}

// yield says whether the segment's time is up: the segment budget by the
// worker's clock, or the margin before the context's deadline.
func (s *segmentRun) yield(context.Context) bool {
	if b := s.w.SegmentBudget; b > 0 && !s.w.now().Before(s.started.Add(b)) {
		s.cause = causeSegmentBudget
		return true
	}
	margin := s.w.DeadlineMargin
	if margin <= 0 {
		margin = DefaultDeadlineMargin
	}
	if !s.deadline.IsZero() && time.Until(s.deadline) <= margin {
		s.cause = causeDeadline
		return true
	}
	return false
}

func (s *segmentRun) hooks() loop.Hooks {
	return loop.Hooks{
		OnStep: func(_ context.Context, st loop.Step) error {
			ctx := s.outer
			if st.Kind == loop.StepFinished || st.Kind == loop.StepSuspended || st.Kind == loop.StepResumed || st.Kind == loop.StepHandedOver {
				return nil // recorded by Settle, Suspend, HandOver and Claim themselves
			}
			// The step goes on record with the segment's next write (the
			// suspension, the settle, a checkpoint, a lease renewal, a
			// fence that must carry it: runs.Store.StampFence): a
			// segment makes few writes, not one per step.
			return s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
				next, err := s.w.Store.AddStep(ctx, cur, s.owner, st)
				if e := s.effect; err == nil && e != nil && st.Kind == loop.StepToolExecuted && st.CallID == e.callID {
					e.added = true
				}
				return next, err
			})
		},
		BeforeEffect: func(_ context.Context, c loop.FencedCall) error { return s.stampFence(s.outer, c) },
		AfterEffect: func(_ context.Context, c loop.FencedCall, _ loop.Result) error {
			// The result goes on record with the call's tool_executed
			// step in the segment's next write; the checkpoint that holds
			// it is kept for a lease renewal that comes first.
			blob, err := c.Checkpoint.Encode()
			if err != nil {
				return fmt.Errorf("encode checkpoint: %w", err)
			}
			s.mu.Lock() // the heartbeat reads it
			s.effect = &effectRecord{callID: c.ID, checkpoint: blob, remaining: c.Checkpoint.RemainingKeys()}
			s.mu.Unlock()
			return nil
		},
		NoEffect: func(_ context.Context, c loop.PendingCall) error {
			ctx := s.outer
			return s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
				return s.w.Store.ClearPendingEffect(ctx, cur, s.owner, c.ID, false)
			})
		},
		ResumeDenied: func(_ context.Context, cp *loop.Checkpoint) error { return s.saveDenials(s.outer, cp) },
		Yield:        s.yield,
	}
}

// saveDenials stores cp, a resumed turn with the calls the policy denied
// at the resume and none done, as the run's checkpoint, before any call of
// the turn runs: a worker that takes the run over continues from it and
// does not run those calls (its own policy, or a release before this one,
// judging the held turn again, might). The steps held so far go with it.
// A fence left by a vanished worker (an idempotent write of the turn: any
// other fence ends the run instead of a take-over) stays, stamped again
// with the checkpoint, which reaches its call.
func (s *segmentRun) saveDenials(ctx context.Context, cp *loop.Checkpoint) error {
	blob, err := cp.Encode()
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	err = s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
		switch {
		case cur.PendingEffect == "":
			return s.w.Store.SaveProgress(ctx, cur, s.owner, blob)
		case cur.PendingIdempotent:
			return s.w.Store.StampFence(ctx, cur, s.owner, runs.Fence{CallID: cur.PendingEffect, Idempotent: true, Checkpoint: blob})
		}
		return nil, fmt.Errorf("call %s's write may have taken effect, and its fence is not idempotent", cur.PendingEffect)
	})
	if err != nil {
		return err
	}
	s.setDurable(cp.RemainingKeys())
	return nil
}

// stampFence stamps the fence before a write call. An idempotent call the
// run's stored position does not reach yet gets a checkpoint that reaches
// it in the same write, so that a new worker can make it again under its
// key instead of failing the run. The fence usually writes the row alone
// (runs.Store.StampFence): the segment's held steps wait for its next
// write.
func (s *segmentRun) stampFence(ctx context.Context, c loop.FencedCall) error {
	if row := s.row(); row.PendingEffect != "" && row.PendingEffect != c.ID && !(row.PendingIdempotent && c.Idempotent) {
		// A fence left by a vanished worker must be the first write a new
		// worker reaches, unless both calls are idempotent: the replay
		// makes an earlier idempotent write of the turn again under its key
		// (the dead worker's effects are all replayable, or the run would
		// not have been taken over) and reaches the fenced call after it.
		// Anything else means the fenced call's outcome stays unknown.
		return fmt.Errorf("call %s was fenced by an earlier worker, but call %s came first", row.PendingEffect, c.ID)
	}
	f := runs.Fence{CallID: c.ID, Idempotent: c.Idempotent}
	if c.Idempotent && !s.isDurable(c.Key) {
		blob, err := c.Checkpoint.Encode()
		if err != nil {
			return fmt.Errorf("encode checkpoint: %w", err)
		}
		f.Checkpoint = blob
	}
	err := s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
		return s.w.Store.StampFence(ctx, cur, s.owner, f)
	})
	if err != nil && f.Checkpoint != nil && !errors.Is(err, errLeaseLost) {
		// The checkpoint could not be stored: stamp a plain fence (the
		// call is then not made again by a new worker).
		s.log.WarnContext(ctx, "fence checkpoint not stored", "err", err)
		f = runs.Fence{CallID: c.ID}
		err = s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
			return s.w.Store.StampFence(ctx, cur, s.owner, f)
		})
	}
	if err == nil && f.Checkpoint != nil {
		s.setDurable(c.Checkpoint.RemainingKeys())
	}
	if err == nil {
		s.fenced = c.PendingCall
	}
	return err
}

// isDurable says whether the run's stored position reaches the call of
// idempotency key key.
func (s *segmentRun) isDurable(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable[key]
}

// setDurable records the keys of the calls the run's stored position
// reaches (the heartbeat updates them too, under s.mu).
func (s *segmentRun) setDurable(keys map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.durable = keys
}

// heartbeat renews the lease while the loop runs, whenever less than half
// of it is left (a long model or tool call records no step). The returned
// function stops it and waits until it has; calling it again does nothing.
func (s *segmentRun) heartbeat(ctx context.Context) (stop func()) {
	ttl := s.w.Store.LeaseTTL()
	every := s.w.Heartbeat
	if every <= 0 {
		every = ttl / 4
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !s.renew(ctx, ttl) {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// renew renews the lease if less than half of ttl is left, and writes a
// claim the segment has not written yet once claimBy has come; false: the
// lease is lost (the loop finds out at its next write). A renewal that
// failed for another reason (a throttle, a timeout) is tried again at the
// next tick: giving up would let the lease lapse during a long call and
// the sweep hand the run to a second worker while this one still works.
func (s *segmentRun) renew(ctx context.Context, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.UnwrittenClaim() {
		if s.w.now().Before(s.claimBy) {
			return true
		}
	} else if s.w.now().Before(s.cur.LeaseUntil.Add(-ttl / 2)) {
		return true
	}
	var next *runs.Run
	var err error
	if e := s.effect; e != nil && e.added {
		// A write's result is in and its step unwritten: store the
		// checkpoint that holds it with the steps, so that a crash during
		// the long call now running does not end the run interrupted_write.
		next, err = s.w.Store.SaveProgress(ctx, s.cur, s.owner, e.checkpoint)
		if err == nil {
			s.durable = e.remaining
		} else if code := runs.ErrorCode(err); code != runs.EConflict && code != runs.ENotFound {
			s.log.WarnContext(ctx, "write checkpoint not stored", "err", err)
			next, err = s.w.Store.RenewLease(ctx, s.cur, s.owner)
		}
	} else {
		next, err = s.w.Store.RenewLease(ctx, s.cur, s.owner)
	}
	switch code := runs.ErrorCode(err); {
	case err == nil:
		s.wrote(next)
		return true
	case code == runs.EConflict || code == runs.ENotFound:
		s.log.WarnContext(ctx, "lease lost: the run was taken, cancelled or purged", "reason", runs.ErrorMessage(err))
		return false
	default:
		s.log.WarnContext(ctx, "lease not renewed; trying again at the next tick", "err", err)
		return true
	}
}

// row returns the current row.
func (s *segmentRun) row() *runs.Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// write applies one lease-guarded store write and keeps the current row.
func (s *segmentRun) write(ctx context.Context, f func(cur *runs.Run) (*runs.Run, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := f(s.cur)
	if err != nil {
		if runs.ErrorCode(err) == runs.EConflict {
			return fmt.Errorf("%w: %s", errLeaseLost, runs.ErrorMessage(err))
		}
		return err
	}
	s.wrote(next)
	return nil
}

// wrote keeps next as the current row (s.mu held); once no step waits
// unwritten, a write's result is on record and its checkpoint not needed.
func (s *segmentRun) wrote(next *runs.Run) {
	s.cur = next
	if n, _ := next.Unwritten(); n == 0 && s.effect != nil && s.effect.added {
		s.effect = nil
	}
}

// resume runs the loop on from the run's suspended state with its decision
// (or the caller's tool results). A state it refuses ends the run, settled
// with the job's context (s.outer), not the loop's, which ends
// DeadlineReserve earlier.
func (s *segmentRun) resume(ctx context.Context, runner *loop.Runner) (loop.Outcome, error) {
	cur := s.row()
	blob, err := s.w.Store.LoadState(ctx, cur)
	if err != nil {
		if ended, ok := s.endedMeanwhile(s.outer, err); ok {
			// A cancel (say) since the claim deleted the blob: expected.
			s.log.InfoContext(ctx, "suspended state gone: the run ended meanwhile", "status", ended.Status, "reason", ended.Reason)
			s.settled = true
			return loop.Outcome{}, nil
		}
		// A missing or corrupted blob is refused: nothing of the held turn runs.
		s.log.ErrorContext(ctx, "suspended state unusable", "err", err)
		s.settled = true
		return loop.Outcome{}, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, runs.ErrorMessage(err), nil)
	}
	state, err := loop.DecodeState(blob)
	if err != nil {
		s.settled = true
		return loop.Outcome{}, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, err.Error(), nil)
	}
	var out loop.Outcome
	switch {
	case state.HandOver != nil:
		// The caller's results of the handed-over client calls.
		results, lerr := s.w.Store.LoadToolResults(ctx, cur)
		if lerr != nil {
			if ended, ok := s.endedMeanwhile(s.outer, lerr); ok {
				s.log.InfoContext(ctx, "tool results gone: the run ended meanwhile", "status", ended.Status, "reason", ended.Reason)
				s.settled = true
				return loop.Outcome{}, nil
			}
			s.log.ErrorContext(ctx, "tool results unusable", "err", lerr)
			s.settled = true
			return loop.Outcome{}, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, runs.ErrorMessage(lerr), &state.Counters)
		}
		out, err = runner.ResumeWithResults(ctx, state, results)
	case cur.Decision == nil:
		s.settled = true
		return loop.Outcome{}, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, "the run has no decision to resume with", nil)
	default:
		d := *cur.Decision
		d.Decider = cur.DecidedBy
		s.setDurable(state.PendingKeys())
		out, err = runner.Resume(ctx, state, d)
	}
	switch {
	case errors.Is(err, loop.ErrToolChanged):
		s.settled = true
		return out, s.settle(s.outer, runs.StatusFailed, loop.ReasonToolChanged, err.Error(), &state.Counters)
	case errors.Is(err, loop.ErrSchemaVersion), errors.Is(err, loop.ErrDigestMismatch), errors.Is(err, loop.ErrInvalidDecision), errors.Is(err, loop.ErrInvalidResults):
		s.settled = true
		return out, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, err.Error(), &state.Counters)
	}
	return out, err
}

// endedMeanwhile tells whether err, a blob of the run found missing, is
// because the run ended (a cancel, say) since this worker claimed it: ending
// a run deletes its blobs, so that is expected, not a fault. It reads the
// row again and returns it when it is terminal; a blob missing on a run that
// is still ours is not explained by it.
func (s *segmentRun) endedMeanwhile(ctx context.Context, err error) (*runs.Run, bool) {
	if code := runs.ErrorCode(err); code != runs.EGone && code != runs.ENotFound {
		return nil, false
	}
	fresh, gerr := s.w.Store.Get(ctx, s.row().ID)
	if gerr != nil || !fresh.Status.Terminal() {
		return nil, false
	}
	return fresh, true
}

// continueRun runs the loop on from the run's checkpoint; a checkpoint
// it refuses ends the run like resume.
func (s *segmentRun) continueRun(ctx context.Context, runner *loop.Runner) (loop.Outcome, error) {
	cur := s.row()
	blob, err := s.w.Store.LoadCheckpoint(ctx, cur)
	if err != nil {
		if ended, ok := s.endedMeanwhile(s.outer, err); ok {
			s.log.InfoContext(ctx, "checkpoint gone: the run ended meanwhile", "status", ended.Status, "reason", ended.Reason)
			s.settled = true
			return loop.Outcome{}, nil
		}
		s.log.ErrorContext(ctx, "checkpoint unusable", "err", err)
		s.settled = true
		return loop.Outcome{}, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, runs.ErrorMessage(err), nil)
	}
	cp, err := loop.DecodeCheckpoint(blob)
	if err == nil && cp.RunID != cur.ID {
		err = fmt.Errorf("%w: the checkpoint is of run %q", loop.ErrInvalidCheckpoint, cp.RunID)
	}
	if err != nil {
		s.settled = true
		return loop.Outcome{}, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, err.Error(), nil)
	}
	s.setDurable(cp.RemainingKeys())
	out, err := runner.Continue(ctx, cp)
	switch {
	case errors.Is(err, loop.ErrToolChanged):
		s.settled = true
		return out, s.settle(s.outer, runs.StatusFailed, loop.ReasonToolChanged, err.Error(), &cp.Counters)
	case errors.Is(err, loop.ErrInvalidCheckpoint):
		s.settled = true
		return out, s.settle(s.outer, runs.StatusFailed, loop.ReasonStateUnreadable, err.Error(), &cp.Counters)
	}
	return out, err
}

// fail handles a Go error from the loop: a lost lease means someone else
// owns the run now; anything else ends the run FAILED — interrupted_write
// when a write's fence is still stamped (it may or may not have happened).
func (s *segmentRun) fail(ctx context.Context, err error, out loop.Outcome) error {
	if s.settled {
		// The loop's error was settled already (resume, continueRun): err
		// is that settle's own failure. The run keeps its status; the job
		// fails so that it is tried again (the sweep takes the run over
		// otherwise).
		s.log.ErrorContext(ctx, "settling the run failed", "err", err)
		return err
	}
	if errors.Is(err, errLeaseLost) {
		s.log.WarnContext(ctx, "stopped: the run was taken or cancelled", "err", err)
		return nil
	}
	reason, detail := loop.ReasonInternalError, "internal error"
	if s.cur.PendingEffect != "" {
		// The settled event names the call (pending_effect); the detail
		// says which write it is and why its outcome is unknown.
		reason, detail = loop.ReasonInterruptedWrite, s.unknownWriteDetail(err)
	}
	s.log.ErrorContext(ctx, "segment failed", "err", err, "reason", reason)
	return s.settle(ctx, runs.StatusFailed, reason, detail, &out.Counters)
}

// maxUnknownWriteDetail bounds the output.detail of a run that ended with
// a write's fence stamped.
const maxUnknownWriteDetail = 500

// unknownWriteDetail is the output.detail of a run that ends with the fence
// of call s.cur.PendingEffect stamped: the write, and why its outcome is
// unknown, in words fit for the run's readers. err is the loop's error (nil
// when the segment ended without one). Only a tool's own cause
// (loop.OutcomeUnknownError) is quoted; any other error may hold what a
// reader must not see (a store's or a server's internals) and stays in the
// log.
func (s *segmentRun) unknownWriteDetail(err error) string {
	id := s.cur.PendingEffect
	mine := s.fenced.ID == id
	tool := ""
	if mine {
		tool = s.fenced.Name
	}
	what := writeCallName(id, tool)
	var unknown *loop.OutcomeUnknownError
	var why string
	switch {
	case errors.As(err, &unknown):
		why = "the tool reported its outcome unknown"
		if c := oneLine(unknown.Cause, 300); c != "" {
			why += " (" + c + ")"
		}
	case mine && s.effect != nil && s.effect.callID == id:
		why = "the call returned, but the run failed before its result was recorded (internal error)"
	case mine && s.timeUp:
		// The worker's deadline, not a fault: a write that did not
		// return in time is not made again (nor handed to the next
		// segment when it was its segment's first call: it had all of a
		// worker's time).
		why = "the call did not return before the worker's time ran out (the function's deadline, less the reserve kept to record the run)"
	case mine:
		why = "the call failed with an error that does not say whether it took effect (internal error)"
	default:
		why = "an earlier worker of the run stamped its fence and vanished, and this worker did not reach the call again"
	}
	return truncate(what+" may or may not have taken effect: "+why, maxUnknownWriteDetail)
}

// writeCallName names a write call for the run's readers: its tool and
// id, or its id alone when the tool is not known ("").
func writeCallName(id, tool string) string {
	if tool == "" {
		return "write call " + oneLine(id, 64)
	}
	return fmt.Sprintf("write %s (call %s)", oneLine(tool, 128), oneLine(id, 64))
}

// terminationOutput is the output of a run that ended other than by its
// model's answer: the reason and a detail for its readers (at most 2000
// bytes).
func terminationOutput(reason loop.TerminationReason, detail string) json.RawMessage {
	output, _ := json.Marshal(struct {
		Reason loop.TerminationReason `json:"reason"`
		Detail string                 `json:"detail,omitempty"`
	}{reason, truncate(detail, 2000)})
	return output
}

// oneLine folds s onto one line of at most n bytes (a UTF-8 sequence is
// never cut).
func oneLine(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}

func (s *segmentRun) finish(ctx context.Context, out loop.Outcome) error {
	if s.settled {
		return nil
	}
	if out.Kind == loop.OutcomeCheckpoint {
		return s.checkpoint(ctx, out)
	}
	if s.cur.PendingEffect != "" {
		// An earlier worker's fence whose call this segment never reached,
		// or this segment's own write that had not returned when the loop
		// stopped (its time ran out, or it was cancelled): that write's
		// outcome stays unknown.
		s.log.ErrorContext(ctx, "segment ended with a fence it did not clear", "pending_effect", s.cur.PendingEffect, "time_up", s.timeUp)
		return s.settle(ctx, runs.StatusFailed, loop.ReasonInterruptedWrite, s.unknownWriteDetail(nil), &out.Counters)
	}
	if out.Kind == loop.OutcomeSuspended {
		return s.suspend(ctx, out)
	}
	if out.Kind == loop.OutcomeAwaitingResults {
		return s.handOver(ctx, out)
	}
	status := runs.StatusCompleted
	if out.Reason != loop.ReasonCompleted {
		status = runs.StatusFailed
	}
	output := runs.FinalOutput(out.FinalText, out.Reason, truncate(out.Detail, 2000))
	s.log.InfoContext(ctx, "run settled", "status", status, "reason", out.Reason,
		"model_calls", out.Counters.ModelCalls, "tool_calls", out.Counters.ToolCalls)
	return s.settleOutput(ctx, status, out.Reason, output, &out.Counters)
}

// checkpoint ends the segment before the worker's time is up: the
// checkpoint is stored, the run goes to RESUMING, and its next segment is
// dispatched (the sweep dispatches it again if that job is lost).
func (s *segmentRun) checkpoint(ctx context.Context, out loop.Outcome) error {
	blob, err := out.Checkpoint.Encode()
	if err != nil {
		return fmt.Errorf("encode checkpoint of run %s: %w", s.cur.ID, err)
	}
	cause := s.cause
	if cause == "" {
		cause = causeDeadline
	}
	next, err := s.w.Store.Checkpoint(ctx, s.cur, s.owner, runs.SegmentEnd{State: blob, Counters: out.Counters, Cause: cause})
	switch runs.ErrorCode(err) {
	case "":
	case runs.ETooLarge:
		// The run cannot go on in another segment: what it holds (the
		// transcript, mostly tool results) does not fit the blob limit.
		s.log.WarnContext(ctx, "checkpoint too large", "err", err)
		return s.settle(ctx, runs.StatusFailed, loop.ReasonStateTooLarge, fmt.Sprintf("%s; %s", runs.ErrorMessage(err), checkpointSizes(out.Checkpoint)), &out.Counters)
	case runs.EInvalid:
		s.log.ErrorContext(ctx, "checkpoint refused", "err", err)
		return s.settle(ctx, runs.StatusFailed, loop.ReasonInternalError, runs.ErrorMessage(err), &out.Counters)
	case runs.EConflict:
		s.log.WarnContext(ctx, "checkpoint refused: the run was taken or cancelled", "reason", runs.ErrorMessage(err))
		return nil
	default:
		return fmt.Errorf("checkpoint run %s: %w", s.cur.ID, err)
	}
	s.cur = next
	s.log.InfoContext(ctx, "segment checkpointed", "cause", cause, "model_calls", out.Counters.ModelCalls, "tool_calls", out.Counters.ToolCalls)
	if s.w.Dispatch == nil {
		return nil
	}
	if err := s.w.Dispatch.Dispatch(ctx, NewJob(s.job.Kind, s.cur)); err != nil {
		// The run is durable in RESUMING: the sweep dispatches it again.
		s.log.WarnContext(ctx, "dispatch of the next segment failed", "err", err)
	}
	return nil
}

func (s *segmentRun) settle(ctx context.Context, status runs.Status, reason loop.TerminationReason, detail string, c *loop.Counters) error {
	return s.settleOutput(ctx, status, reason, terminationOutput(reason, detail), c)
}

func (s *segmentRun) settleOutput(ctx context.Context, status runs.Status, reason loop.TerminationReason, output json.RawMessage, c *loop.Counters) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := s.w.Store.Settle(ctx, s.cur, s.owner, runs.Settlement{Status: status, Reason: reason, Output: output, Counters: c})
	if runs.ErrorCode(err) == runs.EConflict {
		s.log.WarnContext(ctx, "settle refused: the run was taken or cancelled", "reason", runs.ErrorMessage(err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("settle run %s: %w", s.cur.ID, err)
	}
	s.cur = next
	return nil
}

func (s *segmentRun) suspend(ctx context.Context, out loop.Outcome) error {
	st := out.Suspended
	now := s.w.now()
	deadline := now.Add(s.ttl)
	calls := runs.SummarizeCalls(st)
	// Votes decide the turn, call by call, under a quorum and when no one
	// person may decide every held call: then everyone who may decide one
	// is asked (Deciders).
	eligible := runs.Deciders(s.w.Directory, s.cur, calls)
	if len(eligible) > runs.MaxApprovers {
		s.log.WarnContext(ctx, "more persons may decide than a suspension lists; the first ones get links and inbox entries", "eligible", len(eligible), "listed", runs.MaxApprovers)
	}
	eligible = listed(eligible)
	inbox := []string{}
	for _, e := range eligible {
		inbox = append(inbox, e.Subject.Key())
	}
	links, grants, err := s.w.issueLinks(eligible)
	if err != nil {
		return err
	}
	var remindAt time.Time
	mail := s.w.Notifier != nil && len(links) > 0
	if mail {
		// A reminder is mail: without a mailbox to send to (approvers
		// that are local names or IAM principals only), there is none.
		remindAt = now.Add(s.ttl * 8 / 10)
	}
	var checkAt time.Time
	if s.w.Directory != nil && s.w.QuorumChecks {
		// Who may decide can only change with the directory: without one
		// there is nothing to check again.
		checkAt = now.Add(quorumCheckEvery(s.w.QuorumCheckEvery))
	}
	next, err := s.w.Store.Suspend(ctx, s.cur, s.owner, runs.Suspension{
		State:         st,
		Deadline:      deadline,
		RemindAt:      remindAt,
		QuorumCheckAt: checkAt,
		Tokens:        grants,
		InboxKeys:     inbox,
		VotesNeeded:   runs.VotesNeeded(calls),
		PerCallVotes:  runs.HoldsVotes(s.w.Directory, s.cur, calls),
		Notify:        mail, // the notified event is recorded even after a quick decision
	})
	if err != nil {
		if runs.ErrorCode(err) == runs.ETooLarge {
			// Nothing of the held turn ran; the detail names the calls.
			s.log.WarnContext(ctx, "suspended state too large", "err", err)
			return s.settle(ctx, runs.StatusFailed, loop.ReasonStateTooLarge, runs.ErrorMessage(err), &st.Counters)
		}
		if runs.ErrorCode(err) == runs.EInvalid {
			s.log.ErrorContext(ctx, "suspension refused", "err", err)
			return s.settle(ctx, runs.StatusFailed, loop.ReasonInternalError, runs.ErrorMessage(err), &st.Counters)
		}
		if runs.ErrorCode(err) == runs.EConflict {
			s.log.WarnContext(ctx, "suspend refused: the run was taken or cancelled", "reason", runs.ErrorMessage(err))
			return nil
		}
		return fmt.Errorf("suspend run %s: %w", s.cur.ID, err)
	}
	s.cur = next
	s.log.InfoContext(ctx, "run suspended", "suspension_id", st.SuspensionID, "pending_calls", len(st.PendingCalls), "approvers", len(s.cur.Approvers))
	if !mail {
		return nil
	}
	// The suspension is durable; telling approvers is best effort, recorded,
	// and retried by purge when it fails. A decision may come before the
	// outcome is recorded: the notified event still goes on record, under
	// the number the suspension kept for it (runs.Suspension.Notify).
	// Should this worker die before that record, the sweep sends the mail
	// runs.FirstNoticeGrace after the suspension (runs.Run.FirstNoticeDue):
	// no mail of this worker starts after that, nor is waited for, so that
	// none starts after the sweep has recorded and sent its own.
	state := runs.NotificationSent
	failed, late := s.w.mailLinksUntil(ctx, s.log, s.cur, links, false, s.cur.SuspendedAt.Add(runs.FirstNoticeGrace))
	if len(late) > 0 {
		s.log.WarnContext(ctx, "approval mail not sent within the grace after the suspension: recorded as failed, and sent again by the sweep", "not_sent", len(late), "grace", runs.FirstNoticeGrace.String())
	}
	if len(failed) > 0 {
		state = runs.NotificationFailed
	}
	data, _ := json.Marshal(struct {
		SuspensionID string   `json:"suspension_id"`
		Channel      string   `json:"channel"`
		Sent         int      `json:"sent"`
		Failed       []string `json:"failed,omitempty"`
	}{st.SuspensionID, "email", len(links) - len(failed), failed})
	notice := runs.Notice{SuspensionID: st.SuspensionID, State: state, Actor: s.owner, Data: data}
	if state == runs.NotificationFailed {
		notice.RetryAt = s.w.now().Add(MailRetryDelay)
	}
	if _, err := s.w.Store.RecordNotification(ctx, s.cur, notice); err != nil {
		s.log.WarnContext(ctx, "record notification", "err", err)
	}
	return nil
}

// handOver records the hand-over of the turn's client calls: the run waits
// for the caller's results until the deadline.
func (s *segmentRun) handOver(ctx context.Context, out loop.Outcome) error {
	st := out.Suspended
	deadline := s.w.now().Add(s.req.ToolResultsTTL(s.w.toolResultsTTL()))
	next, err := s.w.Store.HandOver(ctx, s.cur, s.owner, runs.HandOff{State: st, Deadline: deadline})
	switch runs.ErrorCode(err) {
	case "":
	case runs.ETooLarge:
		// Nothing was handed over; the detail names the largest calls.
		s.log.WarnContext(ctx, "hand-over state too large", "err", err)
		return s.settle(ctx, runs.StatusFailed, loop.ReasonStateTooLarge, runs.ErrorMessage(err), &st.Counters)
	case runs.EInvalid:
		s.log.ErrorContext(ctx, "hand-over refused", "err", err)
		return s.settle(ctx, runs.StatusFailed, loop.ReasonInternalError, runs.ErrorMessage(err), &st.Counters)
	case runs.EConflict:
		s.log.WarnContext(ctx, "hand-over refused: the run was taken or cancelled", "reason", runs.ErrorMessage(err))
		return nil
	default:
		return fmt.Errorf("hand over run %s: %w", s.cur.ID, err)
	}
	s.cur = next
	s.log.InfoContext(ctx, "client calls handed over", "tool_results_id", st.SuspensionID, "client_calls", len(st.HandOver.Calls))
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // never cut a UTF-8 sequence
		n--
	}
	return s[:n] + "…"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkpointSizes says what fills a checkpoint: the transcript's bytes and
// its largest tool result (never their content).
func checkpointSizes(cp *loop.Checkpoint) string {
	total, largest, largestID := len(cp.Transcript.System), 0, ""
	for _, m := range cp.Transcript.Messages {
		for _, b := range m.Content {
			total += len(b.Text) + len(b.Input) + len(b.Content)
			if b.Type == loop.BlockToolResult && len(b.Content) > largest {
				largest, largestID = len(b.Content), b.ToolUseID
			}
		}
	}
	msg := fmt.Sprintf("the transcript holds %d bytes of text, tool inputs and results in %d messages", total, len(cp.Transcript.Messages))
	if largestID != "" {
		msg += fmt.Sprintf("; the largest tool result is %d bytes (call %s)", largest, truncate(largestID, 64))
	}
	return msg
}
