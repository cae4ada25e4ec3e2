package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/runs"
)

// MailRetryDelay is how soon the sweep mails approvers again after the
// first approval mail of a suspension failed.
const MailRetryDelay = time.Minute

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
// the loop with every step persisted as an event and every write fenced,
// then suspends (state blob, row, tokens; then approvers are told) or settles.
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
	// Policy is the deployment policy (nil: no rules; the tools' own
	// triggers decide, and writes need approval).
	Policy *policy.Policy
	// Owner prefixes lease owners (e.g. the function instance).
	Owner  string
	Logger *slog.Logger
	Now    func() time.Time
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
	owner := fmt.Sprintf("%s/%s", w.Owner, randomHex(6))
	cur, err := w.Store.Claim(ctx, job.RunID, owner)
	switch runs.ErrorCode(err) {
	case "":
	case runs.EConflict, runs.ENotFound:
		log.InfoContext(ctx, "job skipped: run not claimable", "reason", runs.ErrorMessage(err))
		return nil
	default:
		return fmt.Errorf("claim run %s: %w", job.RunID, err)
	}
	log.InfoContext(ctx, "claimed run", "status_was", job.Kind)
	seg := &segmentRun{w: w, cur: cur, owner: owner, log: log}
	var req StartRequest
	if err := json.Unmarshal(cur.Request, &req); err != nil {
		return seg.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, "the stored start request cannot be read", nil)
	}
	seg.req = &req
	seg.ttl = req.ApprovalTTL(w.approvalTTL())
	runner := w.Runner(seg.hooks())
	runner.Policy = runPolicy(w.Policy, w.Directory, cur, &req, log)
	if runner.Tools, err = req.Toolbox(runner.Tools); err != nil {
		// The deployment now has a tool of a client tool's name: the run's
		// tools are no longer what it was started (and approved) with.
		return seg.settle(ctx, runs.StatusFailed, loop.ReasonToolChanged, "client tools: "+err.Error(), nil)
	}

	var out loop.Outcome
	// The run's state says how to continue, whichever job brought us here
	// (a reclaimed run may have lost either kind of worker).
	if jobKind(cur) == JobResume {
		out, err = seg.resume(ctx, runner)
	} else {
		out, err = runner.Run(ctx, req.LoopRequest(cur.ID))
	}
	if err != nil {
		return seg.fail(ctx, err, out)
	}
	return seg.finish(ctx, out)
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
	w     *Worker
	cur   *runs.Run
	owner string
	log   *slog.Logger
	req   *StartRequest
	ttl   time.Duration
	// settled is set when resume already ended the run (refused state).
	settled bool
}

// errLeaseLost marks a hook failure because another worker or a cancel took the run.
var errLeaseLost = errors.New("lease lost")

func (s *segmentRun) hooks() loop.Hooks {
	return loop.Hooks{
		OnStep: func(ctx context.Context, st loop.Step) error {
			if st.Kind == loop.StepFinished || st.Kind == loop.StepSuspended || st.Kind == loop.StepResumed || st.Kind == loop.StepHandedOver {
				return nil // recorded by Settle, Suspend, HandOver and Claim themselves
			}
			return s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
				return s.w.Store.RecordStep(ctx, cur, s.owner, st)
			})
		},
		BeforeEffect: func(ctx context.Context, c loop.PendingCall) error {
			return s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
				return s.w.Store.MarkPendingEffect(ctx, cur, s.owner, c.ID)
			})
		},
		AfterEffect: func(ctx context.Context, c loop.PendingCall, _ loop.Result) error {
			return s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
				return s.w.Store.ClearPendingEffect(ctx, cur, s.owner, c.ID, true)
			})
		},
		NoEffect: func(ctx context.Context, c loop.PendingCall) error {
			return s.write(ctx, func(cur *runs.Run) (*runs.Run, error) {
				return s.w.Store.ClearPendingEffect(ctx, cur, s.owner, c.ID, false)
			})
		},
	}
}

// write applies one lease-guarded store write and keeps the current row.
func (s *segmentRun) write(ctx context.Context, f func(cur *runs.Run) (*runs.Run, error)) error {
	next, err := f(s.cur)
	if err != nil {
		if runs.ErrorCode(err) == runs.EConflict {
			return fmt.Errorf("%w: %s", errLeaseLost, runs.ErrorMessage(err))
		}
		return err
	}
	s.cur = next
	return nil
}

func (s *segmentRun) resume(ctx context.Context, runner *loop.Runner) (loop.Outcome, error) {
	blob, err := s.w.Store.LoadState(ctx, s.cur)
	if err != nil {
		// A missing or corrupted blob is refused: nothing of the held turn runs.
		s.log.ErrorContext(ctx, "suspended state unusable", "err", err)
		s.settled = true
		return loop.Outcome{}, s.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, runs.ErrorMessage(err), nil)
	}
	state, err := loop.DecodeState(blob)
	if err != nil {
		s.settled = true
		return loop.Outcome{}, s.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, err.Error(), nil)
	}
	var out loop.Outcome
	switch {
	case state.HandOver != nil:
		// The caller's results of the handed-over client calls.
		results, lerr := s.w.Store.LoadToolResults(ctx, s.cur)
		if lerr != nil {
			s.log.ErrorContext(ctx, "tool results unusable", "err", lerr)
			s.settled = true
			return loop.Outcome{}, s.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, runs.ErrorMessage(lerr), &state.Counters)
		}
		out, err = runner.ResumeWithResults(ctx, state, results)
	case s.cur.Decision == nil:
		s.settled = true
		return loop.Outcome{}, s.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, "the run has no decision to resume with", nil)
	default:
		d := *s.cur.Decision
		d.Decider = s.cur.DecidedBy
		out, err = runner.Resume(ctx, state, d)
	}
	switch {
	case errors.Is(err, loop.ErrToolChanged):
		s.settled = true
		return out, s.settle(ctx, runs.StatusFailed, loop.ReasonToolChanged, err.Error(), &state.Counters)
	case errors.Is(err, loop.ErrSchemaVersion), errors.Is(err, loop.ErrDigestMismatch), errors.Is(err, loop.ErrInvalidDecision), errors.Is(err, loop.ErrInvalidResults):
		s.settled = true
		return out, s.settle(ctx, runs.StatusFailed, loop.ReasonStateUnreadable, err.Error(), &state.Counters)
	}
	return out, err
}

// fail handles a Go error from the loop: a lost lease means someone else
// owns the run now; anything else ends the run FAILED — interrupted_write
// when a write's fence is still stamped (it may or may not have happened).
func (s *segmentRun) fail(ctx context.Context, err error, out loop.Outcome) error {
	if s.settled {
		return nil
	}
	if errors.Is(err, errLeaseLost) {
		s.log.WarnContext(ctx, "stopped: the run was taken or cancelled", "err", err)
		return nil
	}
	reason := loop.ReasonInternalError
	if s.cur.PendingEffect != "" {
		reason = loop.ReasonInterruptedWrite
	}
	s.log.ErrorContext(ctx, "segment failed", "err", err, "reason", reason)
	return s.settle(ctx, runs.StatusFailed, reason, "internal error", &out.Counters)
}

func (s *segmentRun) finish(ctx context.Context, out loop.Outcome) error {
	if s.settled {
		return nil
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

func (s *segmentRun) settle(ctx context.Context, status runs.Status, reason loop.TerminationReason, detail string, c *loop.Counters) error {
	output, _ := json.Marshal(struct {
		Reason loop.TerminationReason `json:"reason"`
		Detail string                 `json:"detail,omitempty"`
	}{reason, truncate(detail, 2000)})
	return s.settleOutput(ctx, status, reason, output, c)
}

func (s *segmentRun) settleOutput(ctx context.Context, status runs.Status, reason loop.TerminationReason, output json.RawMessage, c *loop.Counters) error {
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
	eligible := runs.Eligible(s.w.Directory, s.cur, calls)
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
	next, err := s.w.Store.Suspend(ctx, s.cur, s.owner, runs.Suspension{
		State:       st,
		Deadline:    deadline,
		RemindAt:    now.Add(s.ttl * 8 / 10),
		Tokens:      grants,
		Purpose:     s.cur.Purpose,
		InboxKeys:   inbox,
		VotesNeeded: runs.VotesNeeded(calls),
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
	if s.w.Notifier == nil || len(links) == 0 {
		return nil
	}
	// The suspension is durable; telling approvers is best effort, recorded,
	// and retried by purge when it fails.
	state := runs.NotificationSent
	failed := s.w.mailLinks(ctx, s.log, s.cur, links, false)
	if len(failed) > 0 {
		state = runs.NotificationFailed
	}
	data, _ := json.Marshal(struct {
		Channel string   `json:"channel"`
		Sent    int      `json:"sent"`
		Failed  []string `json:"failed,omitempty"`
	}{"email", len(links) - len(failed), failed})
	notice := runs.Notice{SuspensionID: st.SuspensionID, State: state, Data: data}
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
	return s[:n] + "…"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
