package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// SweepSummary counts what one sweep did.
type SweepSummary struct {
	Scanned      int `json:"scanned"`
	Expired      int `json:"expired"`
	Redispatched int `json:"redispatched"`
	// Reaped counts runs whose worker vanished, handed to a new worker
	// (nothing of the lost segment is made again but idempotent calls).
	Reaped      int `json:"reaped"`
	Interrupted int `json:"interrupted_writes"`
	// WorkersLost counts runs ended worker_lost: taken over or
	// re-dispatched runs.MaxReclaims times in a row without getting further.
	WorkersLost int `json:"workers_lost"`
	Purged      int `json:"purged"`
	// Reminded counts the reminders sent (Sweeper.Remind at 80% of the
	// window).
	Reminded int `json:"reminded"`
	// MailRetried counts waiting runs whose failed approval mail was sent
	// again: to the approvers it failed for alone (Sweeper.RetryMail), or,
	// for a suspension's first mail, to all who may still vote
	// (Sweeper.Remind in the reminder's place).
	MailRetried int `json:"mail_retried"`
	// MailRecovered counts waiting runs whose first approval mail the
	// sweep sent because the worker that held the turn recorded none
	// within runs.FirstNoticeGrace (Sweeper.FirstMail).
	MailRecovered int `json:"mail_recovered"`
	// QuorumChecked counts waiting runs whose held calls were found, at
	// their quorum check, to be able to get their approvals still;
	// Unmeetable, those ended approval_unmeetable because one cannot.
	QuorumChecked int `json:"quorum_checked"`
	Unmeetable    int `json:"approvals_unmeetable"`
	// VotesResumed counts the runs a quorum check resumed because the
	// votes cast decide every held call under the directory in force
	// (runs.Store.ResumeDecided).
	VotesResumed int `json:"votes_resumed"`
	// DecidersRevised counts the quorum checks that changed who is asked
	// to decide a run's held turn (runs.Store.ReviseDeciders): a switch to
	// per-call votes, persons asked, inbox entries dropped or restored.
	DecidersRevised int `json:"deciders_revised"`
	Skipped         int `json:"skipped"`
	// Deliveries counts webhook attempts.
	Deliveries int `json:"webhook_attempts"`
	// Queued counts the runs with webhook attempts due that a sweep gave
	// to Sweeper.QueueDeliveries rather than make them itself, including
	// any the queue did not take (serve's, when full: the next sweep gives
	// them again).
	Queued int `json:"webhook_runs_queued"`
	// WaitingForSecret counts due webhook deliveries no attempt could be
	// made at, for want of a sender (no signing secret configured) or of
	// its secret (it could not be read): postponed, or given up (GivenUp)
	// once they waited their schedule's span.
	WaitingForSecret int `json:"webhooks_waiting_for_secret"`
	GivenUp          int `json:"webhooks_given_up"`
	Errors           int `json:"errors"`
	// More is set when the sweep stopped at its bound with due work left.
	More bool `json:"more"`
	// secretErr is why the sender could not sign this sweep's deliveries
	// (a *webhook.SecretUnavailableError); nil while it could.
	secretErr error
}

// Sweeper is the scheduled purge: one pass over the due index that expires
// approvals past their deadline, ends waiting runs whose approval can no
// longer be given (checkQuorum), sends the reminders, the retries of failed
// approval mail and the first approval mail of a hold whose worker recorded
// none (FirstMail), reaps runs whose worker lease expired,
// re-dispatches QUEUED/RESUMING runs whose dispatch was lost, deletes
// settled runs past retention, and makes the runs' due webhook attempts.
// Work per sweep is bounded by MaxRuns; what is left is due on the next
// tick.
//
// The lifecycle steps (expiry, first mail, quorum check, reminder, re-dispatch,
// takeover, purge) are taken one after another on the sweep's goroutine.
// The webhook deliveries of up to DeliveryConcurrency runs are made at the
// same time, each run's on its own goroutine, in order; a run with
// deliveries due has its lifecycle step taken once they are done (its row
// is never written by two goroutines at once).
//
// With QueueDeliveries set (serve), a sweep makes no attempt: it takes the
// lifecycle steps, and gives the runs with deliveries due to
// QueueDeliveries, whose DeliverRuns make them on goroutines of their own.
//
// Sweep and DeliverRun may run at the same time, on any number of
// goroutines: each takes a run up before it reads it and lets it go when
// done, and a pass leaves a run another pass of the same Sweeper has (see
// runClaims), so two passes of one process never attempt one run's
// deliveries at the same time, nor write its row at once. Passes of two
// processes (a Lambda worker's first attempts and purge's sweep) do not
// see each other's: an attempt one makes and the other cannot record is
// made again, with the same webhook-id (at least once).
type Sweeper struct {
	Store    *runs.Store
	Dispatch Dispatcher
	// Remind, when set, sends the reminder for a waiting run (80% of the
	// window), or the retry of its first approval mail when that failed.
	Remind func(ctx context.Context, r *runs.Run) error
	// FirstMail, when set, sends the first approval mail of a waiting run
	// whose worker recorded none within runs.FirstNoticeGrace of the
	// suspension (runs.Run.FirstNoticeDue: Worker.RecoverFirstMail). Nil:
	// such a run waits on, due, for a sweep that has it.
	FirstMail func(ctx context.Context, r *runs.Run) error
	// RetryMail, when set, mails once more those approvers of a waiting
	// run whose approval mail failed with no other retry to follow
	// (runs.Run.MailRetry, due at MailRetryAt: Worker.RetryMail), and
	// returns the run as written. Nil: the list is left as it is.
	RetryMail func(ctx context.Context, r *runs.Run) (*runs.Run, error)
	// Directory is the deployment directory in force, against which a
	// waiting run's quorum is checked again (checkQuorum). Nil: no
	// directory, no check (a run is never ended for want of one).
	Directory *identity.Directory
	// QuorumCheckEvery is the interval of the quorum checks (0:
	// DefaultQuorumCheckEvery): a check schedules the next one this long
	// after it, and a call it marks lost is confirmed lost, ending the
	// run, only by a check at least this long after the mark. Give the
	// Worker that holds turns the same (its first check).
	QuorumCheckEvery time.Duration
	// Revise, when set, writes what a quorum check changes in who is asked
	// to decide a waiting run, with approval links for those it asks, and
	// mails them those links (Worker.ReviseDeciders). Nil: the change is
	// written without links (runs.Store.ReviseDeciders: inbox entries only).
	Revise func(ctx context.Context, r *runs.Run, at time.Time, found runs.QuorumFinding, rev runs.DeciderRevision) (*runs.Run, error)
	// Webhooks sends the runs' due webhook deliveries (nil: this process
	// has no signing secret; due deliveries wait for one without using up
	// their attempts, as they do while the sender cannot read its secret,
	// and are given up once they waited their schedule's span: see
	// waitForSecret).
	Webhooks WebhookSender
	// Schedule is the retry schedule of deliveries (zero:
	// webhook.DefaultSchedule).
	Schedule webhook.Schedule
	// DeliveryBudget bounds the time a sweep spends on webhook attempts:
	// another attempt is made only while one more, at its longest
	// (webhook.DefaultTimeout), still ends within it (default
	// DefaultDeliveryBudget). MaxDeliveries, when above zero, also bounds
	// their number. Both bound the sweep as a whole, whatever number of
	// runs it delivers to at the same time.
	DeliveryBudget time.Duration
	MaxDeliveries  int
	// DeliveryConcurrency bounds the runs whose deliveries a sweep makes at
	// the same time (default DefaultDeliveryConcurrency; 1: one run after
	// another). One run's deliveries are made one after another, in order.
	DeliveryConcurrency int
	MaxRuns             int
	Logger              *slog.Logger
	Now                 func() time.Time
	// Owner is this process's worker owner (its workers' lease owners
	// begin with Owner + "/"): Recover takes the other owners' leases for
	// dead ones.
	Owner string
	// QueueDeliveries, when set, is given the runs whose webhook attempts
	// DeliverRun is to make on other goroutines (serve queues them as it
	// queues the runs runs.Store.NotifyScheduled names): a Sweep gives it
	// each run it finds with deliveries due, once it has taken the run's
	// lifecycle step and let it go, instead of making the attempts itself,
	// so that no receiver ever holds up a sweep; and a run for which
	// DeliverRun was called while another pass had it is given to it when
	// that pass lets the run go. It must not block; a run it drops waits
	// for the next sweep. Nil: a Sweep makes the due attempts itself (the
	// purge function), and such a DeliverRun is left to the next sweep.
	QueueDeliveries func(runID string)
	// unrecorded holds attempts made but not recorded (deliver.go).
	unrecorded unrecordedAttempts
	// claims are the runs a pass of this Sweeper has taken up (claims.go).
	claims runClaims
}

// letGo ends a pass's claim on run id, and gives the run to
// QueueDeliveries when DeliverRun was called for it meanwhile, or the
// sweep that had it found deliveries due.
func (s *Sweeper) letGo(id string) {
	if s.claims.release(id) && s.QueueDeliveries != nil {
		s.QueueDeliveries(id)
	}
}

// Sweep runs one pass and logs a summary line.
func (s *Sweeper) Sweep(ctx context.Context) (SweepSummary, error) {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	maxRuns := s.MaxRuns
	if maxRuns <= 0 {
		maxRuns = 500
	}
	var sum SweepSummary
	cursor := ""
	at := s.now()
	round := s.newRound(at)
	mark := s.claims.sweepBegins()
	defer s.claims.sweepEnds()
	lifecycle := func(r *runs.Run) {
		if err := s.one(ctx, r, at, &sum); err != nil {
			sum.Errors++
			log.WarnContext(ctx, "sweep: run not handled", "run_id", r.ID, "status", r.Status, "err", err)
		}
	}
	// A run whose deliveries are done comes back here, to this goroutine,
	// for its lifecycle step, as it was last written, and is let go.
	pool := newDeliveryPool(s.DeliveryConcurrency, func(d delivered) {
		sum.add(d.sum)
		if !at.Before(s.Store.LifecycleDue(d.run)) { // else it was due for its deliveries only
			lifecycle(d.run)
		}
		s.letGo(d.run.ID)
	})
	// seen holds the runs this sweep took up: a run whose deliveries are
	// under way moves within the due index with each record, and a later
	// page can hold it again.
	seen := map[string]bool{}
	for {
		page, next, err := s.Store.Due(ctx, at, min(100, maxRuns-sum.Scanned), cursor)
		if err != nil {
			pool.wait() // no goroutine of the sweep outlives it
			log.ErrorContext(ctx, "sweep: due query failed", "err", err)
			return sum, fmt.Errorf("sweep: %w", err)
		}
		for _, r := range page {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			sum.Scanned++
			if !s.claims.take(r.ID, false) {
				// A delivery pass of this process has it under way: the
				// first sweep after that pass ends takes it up (a pass
				// lasts at most its delivery budget).
				sum.Skipped++
				continue
			}
			if s.claims.endedSince(r.ID, mark) {
				// Another pass had it since this page was read: its
				// records are not on the page.
				fresh, err := s.Store.Get(ctx, r.ID)
				if err != nil {
					s.letGo(r.ID)
					if skipConflict(err, &sum) != nil {
						sum.Errors++
						log.WarnContext(ctx, "sweep: run not read again", "run_id", r.ID, "err", err)
					}
					continue
				}
				r = fresh
			}
			if r.OutboxSendable() && s.QueueDeliveries != nil {
				// DeliverRun makes the attempts, on another goroutine,
				// once the run is let go.
				if due := r.OutboxDue(); !due.IsZero() && !at.Before(due) {
					s.claims.ask(r.ID)
					sum.Queued++
				}
				if !at.Before(s.Store.LifecycleDue(r)) { // else it was due for its deliveries only
					lifecycle(r)
				}
				s.letGo(r.ID)
				continue
			}
			if r.OutboxSendable() {
				pool.start(func() delivered {
					fresh, dsum := s.deliver(ctx, r, at, round, log)
					return delivered{run: fresh, sum: dsum}
				})
				continue
			}
			pool.collect()
			lifecycle(r)
			s.letGo(r.ID)
		}
		cursor = next
		if cursor == "" {
			break
		}
		if sum.Scanned >= maxRuns {
			sum.More = true
			break
		}
	}
	pool.wait()
	sum.secretErr = round.secretError()
	warnWaitingForSecret(ctx, log, sum)
	// A sweep that found nothing to do (every counter zero, as most are
	// on a quiet server) says so at debug level, not every period at info.
	level := slog.LevelInfo
	if sum.idle() {
		level = slog.LevelDebug
	}
	log.Log(ctx, level, "sweep done", "scanned", sum.Scanned, "expired", sum.Expired, "redispatched", sum.Redispatched,
		"reaped", sum.Reaped, "interrupted_writes", sum.Interrupted, "workers_lost", sum.WorkersLost, "purged", sum.Purged, "reminded", sum.Reminded, "mail_retried", sum.MailRetried, "mail_recovered", sum.MailRecovered,
		"quorum_checked", sum.QuorumChecked, "approvals_unmeetable", sum.Unmeetable, "votes_resumed", sum.VotesResumed, "deciders_revised", sum.DecidersRevised, "skipped", sum.Skipped, "webhook_attempts", sum.Deliveries, "webhook_runs_queued", sum.Queued, "webhooks_waiting_for_secret", sum.WaitingForSecret,
		"webhooks_given_up", sum.GivenUp, "errors", sum.Errors, "more", sum.More)
	return sum, nil
}

// warnWaitingForSecret logs, once for a sweep rather than for each
// delivery, that deliveries were due and this process could not send them:
// it has no secret, or could not read it (the error names the secret and
// why, never its value).
func warnWaitingForSecret(ctx context.Context, log *slog.Logger, sum SweepSummary) {
	if sum.WaitingForSecret == 0 {
		return
	}
	if sum.secretErr != nil {
		log.WarnContext(ctx, "webhook deliveries are due but the webhook secret could not be read: they wait for it, without using up their attempts",
			"deliveries", sum.WaitingForSecret, "given_up", sum.GivenUp, "retry_in", webhook.NoSecretRetry.String(), "err", sum.secretErr)
		return
	}
	log.WarnContext(ctx, "webhook deliveries are due but no webhook secret is configured: they wait for a process with the secret, without using up their attempts",
		"deliveries", sum.WaitingForSecret, "given_up", sum.GivenUp, "retry_in", webhook.NoSecretRetry.String())
}

// Recover dispatches, at once, every QUEUED or RESUMING run whose dispatch
// grace has not run out yet, and takes over every RUNNING run whose lease
// another owner than this process's holds (its lease ended now:
// runs.Store.EndLease), then runs an ordinary Sweep. A process that starts
// on a store no other process opens (serve on the embedded store) calls
// it at start-up: the jobs and workers of a previous process died with
// it, so waiting out their grace period or lease would only delay them.
func (s *Sweeper) Recover(ctx context.Context) (SweepSummary, error) {
	at := s.now()
	var sum SweepSummary
	cursor := ""
	for {
		page, next, err := s.Store.Due(ctx, at.Add(max(s.Store.DispatchGrace(), s.Store.LeaseTTL())), 100, cursor)
		if err != nil {
			return sum, fmt.Errorf("recover: %w", err)
		}
		for _, r := range page {
			switch {
			case r.Status == runs.StatusQueued || r.Status == runs.StatusResuming:
				if r.DueAt.After(at.Add(s.Store.DispatchGrace())) {
					continue // dispatched in this pass already (its due time moved on), or not ours to hurry
				}
			case r.Status == runs.StatusRunning && !r.LeaseExpired(at) && s.Owner != "" && !strings.HasPrefix(r.LeaseOwner, s.Owner+"/"):
				// Ended here, taken over by the Sweep below (as after
				// an expired lease).
				if _, err := s.Store.EndLease(ctx, r); err != nil {
					if runs.ErrorCode(err) != runs.EConflict {
						sum.Errors++
						s.logger().WarnContext(ctx, "recover: lease not ended", "run_id", r.ID, "err", err)
					}
					continue
				}
				s.logger().InfoContext(ctx, "recover: ended the lease of a previous process's worker", "run_id", r.ID, "previous_owner", r.LeaseOwner)
				continue
			default:
				continue
			}
			sum.Scanned++
			if err := s.one(ctx, r, at, &sum); err != nil {
				sum.Errors++
				s.logger().WarnContext(ctx, "recover: run not handled", "run_id", r.ID, "status", r.Status, "err", err)
			}
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	more, err := s.Sweep(ctx)
	sum.add(more)
	return sum, err
}

// now is the sweeper's clock (Now, else the wall clock).
func (s *Sweeper) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Sweeper) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// idle reports whether every counter of sum is zero (and More unset).
func (sum SweepSummary) idle() bool {
	sum.secretErr = nil
	return sum == SweepSummary{}
}

func (sum *SweepSummary) add(o SweepSummary) {
	sum.Scanned += o.Scanned
	sum.Expired += o.Expired
	sum.Redispatched += o.Redispatched
	sum.Reaped += o.Reaped
	sum.Interrupted += o.Interrupted
	sum.WorkersLost += o.WorkersLost
	sum.Purged += o.Purged
	sum.Reminded += o.Reminded
	sum.MailRetried += o.MailRetried
	sum.MailRecovered += o.MailRecovered
	sum.QuorumChecked += o.QuorumChecked
	sum.Unmeetable += o.Unmeetable
	sum.VotesResumed += o.VotesResumed
	sum.DecidersRevised += o.DecidersRevised
	sum.Skipped += o.Skipped
	sum.Deliveries += o.Deliveries
	sum.Queued += o.Queued
	sum.WaitingForSecret += o.WaitingForSecret
	sum.GivenUp += o.GivenUp
	sum.Errors += o.Errors
	sum.More = sum.More || o.More
}

func (s *Sweeper) one(ctx context.Context, r *runs.Run, now time.Time, sum *SweepSummary) error {
	switch {
	case r.Status == runs.StatusWaiting && !now.Before(r.ApprovalDeadline):
		if _, err := s.Store.Expire(ctx, r); err != nil {
			return skipConflict(err, sum)
		}
		sum.Expired++
	case r.Status == runs.StatusWaitingForToolResults && (r.HandOver == nil || !now.Before(r.HandOver.Deadline)):
		if _, err := s.Store.Expire(ctx, r); err != nil {
			return skipConflict(err, sum)
		}
		sum.Expired++
	case r.Status == runs.StatusWaiting:
		if first := r.FirstNoticeDue(); s.FirstMail != nil && !first.IsZero() && !now.Before(first) && !s.reminderDue(r, now) {
			// The worker that held the turn recorded no first mail: nobody
			// it listed may have been told (a quorum check that asked
			// someone since does not change that). The quorum check, if
			// due, waits for the next sweep. A reminder due already is
			// sent instead (below): it goes to the same approvers, and
			// owes no first mail after it (Run.FirstNoticeDue).
			if err := s.FirstMail(ctx, r); err != nil {
				return skipConflict(err, sum)
			}
			sum.MailRecovered++
			return nil
		}
		checked := false
		if !r.QuorumCheckAt.IsZero() && !now.Before(r.QuorumCheckAt) {
			next, err := s.checkQuorum(ctx, r, now, sum)
			switch {
			case err != nil:
				return skipConflict(err, sum)
			case next == nil:
				return nil // ended
			}
			r, checked = next, true
		}
		if !s.reminderDue(r, now) {
			// The reminder, when due, mails those whose mail is to be
			// retried as well (and clears the list).
			if s.RetryMail != nil && len(r.MailRetry) > 0 && !r.MailRetryAt.IsZero() && !now.Before(r.MailRetryAt) {
				if _, err := s.RetryMail(ctx, r); err != nil {
					return skipConflict(err, sum)
				}
				sum.MailRetried++
				return nil
			}
			if !checked {
				sum.Skipped++
			}
			return nil
		}
		if err := s.Remind(ctx, r); err != nil {
			return err
		}
		if retriesFirstMail(r) {
			sum.MailRetried++ // the first mail, which failed, sent again
		} else {
			sum.Reminded++
		}
	case r.Status == runs.StatusQueued || r.Status == runs.StatusResuming:
		// Record the re-dispatch (moving the run's due time on, so the next
		// tick does not dispatch it again at once) before dispatching: a
		// write after the dispatch would move the version under the
		// worker's claim. A conflict means a worker claimed it meanwhile.
		next, err := s.Store.Redispatch(ctx, r, "purge")
		if err != nil {
			return skipConflict(err, sum)
		}
		if next.Status.Terminal() {
			// Dispatched runs.MaxReclaims times in a row to workers that
			// never got to write: ended worker_lost, nothing to dispatch.
			s.logger().WarnContext(ctx, "run ended: its workers kept vanishing before their first write", "run_id", r.ID, "reclaims", r.Reclaims)
			sum.WorkersLost++
			return nil
		}
		if err := s.Dispatch.Dispatch(ctx, Job{Kind: jobKind(r), RunID: r.ID}); err != nil {
			return err
		}
		sum.Redispatched++
	case r.Status == runs.StatusRunning && r.LeaseExpired(now):
		// The worker vanished. A new worker takes the run over (Claim
		// accepts an expired lease) from its checkpoint, its suspended state
		// or its request when that repeats no write: no fence, or the fenced
		// call is idempotent and made again under its key, and every write
		// done since is held by the checkpoint. Otherwise a write's outcome
		// is unknown, or a replay would make it again: never re-execute,
		// end the run FAILED/interrupted_write. A run taken over
		// runs.MaxReclaims times in a row without getting further ends
		// FAILED/worker_lost: something kills its workers at one step.
		if r.Reclaimable() {
			if err := s.Dispatch.Dispatch(ctx, Job{Kind: jobKind(r), RunID: r.ID}); err != nil {
				return err
			}
			sum.Reaped++
			return nil
		}
		reason := r.LostWorkerReason()
		if _, err := s.Store.Settle(ctx, r, "", runs.Settlement{Status: runs.StatusFailed, Reason: reason, Output: lostWorkerOutput(r, reason)}); err != nil {
			return skipConflict(err, sum)
		}
		if reason == loop.ReasonWorkerLost {
			s.logger().WarnContext(ctx, "run ended: its workers kept vanishing at one step", "run_id", r.ID, "reclaims", r.Reclaims)
			sum.WorkersLost++
			return nil
		}
		sum.Interrupted++
	case r.Status.Terminal() && !now.Before(r.RetainUntil) && len(r.Outbox) > 0:
		// Its deliveries first (runs.Store.LifecycleDue): purged once the
		// last is delivered or given up.
		sum.Skipped++
	case r.Status.Terminal() && !now.Before(r.RetainUntil):
		if err := s.Store.Purge(ctx, r.ID); err != nil {
			return skipConflict(err, sum)
		}
		sum.Purged++
	default:
		sum.Skipped++
	}
	return nil
}

// reminderDue reports whether waiting run r's reminder (or the retry of
// its failed first mail, which takes the reminder's time) is due at now
// and this sweep sends it.
func (s *Sweeper) reminderDue(r *runs.Run, now time.Time) bool {
	return s.Remind != nil && !r.ReminderSent && !r.RemindAt.IsZero() && !now.Before(r.RemindAt)
}

// checkQuorum checks again, against the directory in force, that every
// held call of waiting run r not yet approved or denied can still get the
// approvals it needs (runs.CheckOpenApprovals: the rule a turn is checked
// by when it is planned, on the terms the call was held with, less those
// who voted). A run is ended only for a held call that two checks, at
// least the interval (Sweeper.QuorumCheckEvery) apart, both find certainly
// cannot: the first finding marks the call on the row (runs.Run.QuorumLost,
// at the sweep's time now, with a warning naming the run and calls) and
// the next check is scheduled the interval later; a directory deployed by mistake and
// fixed before that check ends nothing (the check clears the mark), nor
// does a later mistake that takes out another call (its own mark starts
// then). When a check finds a marked call still lost the run ends EXPIRED
// (approval_unmeetable, naming the calls so confirmed) in a write
// conditional on the row the check read (runs.Store.EndUnmeetable: a vote
// that lands first wins, and the run is checked again on the row it left)
// and checkQuorum returns nil; otherwise the row written is returned. It
// never ends a run on what it cannot tell: without a directory, or for a
// call whose initiator or approver entries this build cannot read, the
// check keeps the marks as they are and is only scheduled again.
//
// A run whose votes decide every held call under the directory in force,
// though it waits (a directory change since the last vote), is resumed
// instead, with what they decided (runs.Store.ResumeDecided), and the
// resume job dispatched.
//
// A check that could check every held call also keeps who is asked to
// decide in step with the directory, in the write that schedules the next
// check (runs.PlanDeciders, written by revise): the run leaves the inbox
// of those who may decide no held call still open and comes back to it
// when they may again; and when no held call is found lost, a turn held
// for one decision that no one person may decide any more, while each call
// keeps deciders of its own, is switched to per-call votes, and those who
// may decide now and were not asked get what a hold gives them (an inbox
// entry, and mail with a link).
func (s *Sweeper) checkQuorum(ctx context.Context, r *runs.Run, now time.Time, sum *SweepSummary) (*runs.Run, error) {
	if r.DecidedByVotesIn(s.Directory) {
		// A directory change since the last vote left the votes cast
		// deciding every held call, though the run waits (and nobody is
		// asked any more): resume it with what they decided, as the next
		// approver's vote would.
		next, err := s.Store.ResumeDecided(ctx, r, s.Directory)
		switch {
		case runs.ErrorCode(err) == runs.EGone:
			// The window closed during the sweep: the next one expires it.
			sum.Skipped++
			return nil, nil
		case err != nil:
			return nil, err
		}
		s.logger().InfoContext(ctx, "quorum check: the votes cast decide every held call under the directory in force; the run resumes", "run_id", r.ID, "suspension_id", r.SuspensionID)
		sum.VotesResumed++
		if s.Dispatch == nil {
			return nil, nil // the next sweep dispatches it (re-dispatch of a RESUMING run)
		}
		if err := s.Dispatch.Dispatch(ctx, NewJob(JobResume, next)); err != nil {
			// The decision is durable; the sweep re-dispatches a run left
			// RESUMING.
			s.logger().WarnContext(ctx, "dispatch failed; the sweep will retry", "run_id", r.ID, "err", err)
		}
		return nil, nil
	}
	found := runs.QuorumFinding{At: now}
	var lost map[string]string
	if s.Directory == nil {
		// Nothing can be told: every mark stays as it is.
		for _, c := range r.PendingCalls {
			found.Unsure = append(found.Unsure, c.ID)
		}
	} else {
		var unsure map[string]string
		lost, unsure = runs.CheckOpenApprovals(s.Directory, r)
		for _, id := range slices.Sorted(maps.Keys(unsure)) {
			s.logger().WarnContext(ctx, "quorum check: a held call's approval could not be checked; the run waits on", "run_id", r.ID, "call_id", id, "reason", unsure[id])
			found.Unsure = append(found.Unsure, id)
		}
		found.Lost = slices.Sorted(maps.Keys(lost))
	}
	// A call is confirmed lost when a check at least the interval after
	// its mark finds it still so; the next check is due when the earliest
	// mark of a call found lost now may be confirmed.
	every := quorumCheckEvery(s.QuorumCheckEvery)
	confirmed := map[string]string{}
	at := now.Add(every)
	for id, why := range lost {
		since, marked := r.LostSince(id)
		switch confirmAt := since.Add(every); {
		case !marked:
		case !now.Before(confirmAt):
			confirmed[id] = why
		case confirmAt.Before(at):
			at = confirmAt
		}
	}
	if len(confirmed) > 0 {
		if _, err := s.Store.EndUnmeetable(ctx, r, confirmed); err != nil {
			return nil, err
		}
		s.logger().InfoContext(ctx, "run ended: a held call can no longer get its approvals", "run_id", r.ID, "suspension_id", r.SuspensionID, "calls", lostCalls(confirmed), "lost_since", r.FirstLost())
		sum.Unmeetable++
		return nil, nil
	}
	var rev runs.DeciderRevision
	if s.Directory != nil && len(found.Unsure) == 0 {
		rev = runs.PlanDeciders(s.Directory, r, len(lost) == 0)
	}
	next, err := s.revise(ctx, r, at, found, rev, sum)
	if err != nil {
		return nil, err
	}
	switch {
	case len(lost) > 0:
		s.logger().WarnContext(ctx, "quorum check: a held call can no longer get its approvals from the directory in force; the run ends at the next check that finds it still so, the check interval or more after the first, unless the directory is fixed by then",
			"run_id", r.ID, "suspension_id", r.SuspensionID, "calls", lostCalls(lost), "next_check", next.QuorumCheckAt, "check_every", every.String())
	case len(r.QuorumLost) > 0 && len(next.QuorumLost) == 0:
		s.logger().InfoContext(ctx, "quorum check: the held calls can get their approvals again; the run waits on", "run_id", r.ID, "suspension_id", r.SuspensionID, "lost_since", r.FirstLost())
	}
	sum.QuorumChecked++
	return next, nil
}

// revise schedules the next quorum check of waiting run r at at, with
// what the check found (lost) and rev, what it changes in who is asked to
// decide (runs.PlanDeciders), in one write conditional on the row the
// check read: through Revise when set (links for those asked, mailed once
// the write is durable), else on the store (inbox entries only).
func (s *Sweeper) revise(ctx context.Context, r *runs.Run, at time.Time, found runs.QuorumFinding, rev runs.DeciderRevision, sum *SweepSummary) (*runs.Run, error) {
	if rev.IsZero() {
		return s.Store.ScheduleQuorumCheck(ctx, r, at, found)
	}
	var next *runs.Run
	var err error
	if s.Revise != nil {
		next, err = s.Revise(ctx, r, at, found, rev)
	} else {
		next, err = s.Store.ReviseDeciders(ctx, r, at, found, rev)
	}
	if err != nil {
		return nil, err
	}
	asked := make([]string, 0, len(rev.Ask))
	for _, e := range rev.Ask {
		asked = append(asked, e.Subject.Key())
	}
	s.logger().InfoContext(ctx, "quorum check: who is asked to decide the held turn follows the directory in force",
		"run_id", r.ID, "suspension_id", r.SuspensionID, "per_call_votes", rev.PerCallVotes, "asked", asked, "dropped", rev.Drop, "restored", rev.Restore)
	sum.DecidersRevised++
	return next, nil
}

// lostCalls lists the calls of a quorum check's finding, and why, for a log
// line: "call-1: why; call-2: why", in call id order.
func lostCalls(lost map[string]string) string {
	ids := slices.Sorted(maps.Keys(lost))
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, id+": "+lost[id])
	}
	return strings.Join(parts, "; ")
}

// delivered is a run whose due deliveries a goroutine of the sweep made:
// the run as last written, and what its deliveries did.
type delivered struct {
	run *runs.Run
	sum SweepSummary
}

// deliveryPool runs the deliveries of up to n runs at the same time, each
// run's on a goroutine of its own, and hands each run back to done on the
// goroutine that owns the pool (the sweep's), which alone calls its
// methods.
type deliveryPool struct {
	n        int
	busy     int
	finished chan delivered
	done     func(delivered)
}

func newDeliveryPool(n int, done func(delivered)) *deliveryPool {
	if n <= 0 {
		n = DefaultDeliveryConcurrency
	}
	// Room for every goroutine's result: none waits to hand it back.
	return &deliveryPool{n: n, finished: make(chan delivered, n), done: done}
}

// start runs deliver on a goroutine of its own, once one of the n is free
// (it hands back the runs that finished meanwhile).
func (p *deliveryPool) start(deliver func() delivered) {
	for p.busy >= p.n {
		p.finish(<-p.finished)
	}
	p.busy++
	go func() { p.finished <- deliver() }()
}

// collect hands back the runs whose deliveries have finished, without
// waiting for the others.
func (p *deliveryPool) collect() {
	for {
		select {
		case d := <-p.finished:
			p.finish(d)
		default:
			return
		}
	}
}

// wait hands back every run, waiting for the deliveries under way.
func (p *deliveryPool) wait() {
	for p.busy > 0 {
		p.finish(<-p.finished)
	}
}

func (p *deliveryPool) finish(d delivered) {
	p.busy--
	p.done(d)
}

// jobKind is the job that continues a run: resume when a decision or the
// results of handed-over client calls wait to be applied to the stored
// state, run otherwise.
func jobKind(r *runs.Run) JobKind {
	if !r.State.IsZero() && (r.Decision != nil || (r.HandOver != nil && !r.HandOver.Results.IsZero())) {
		return JobResume
	}
	return JobRun
}

func skipConflict(err error, sum *SweepSummary) error {
	if runs.ErrorCode(err) == runs.EConflict || runs.ErrorCode(err) == runs.ENotFound {
		sum.Skipped++
		return nil
	}
	return err
}

// lostWorkerOutput is the output of a run the sweep ends because its
// worker vanished: the reason, and for an interrupted write the call whose
// outcome is unknown, as a worker that lives to see it says it.
func lostWorkerOutput(r *runs.Run, reason loop.TerminationReason) json.RawMessage {
	if reason != loop.ReasonInterruptedWrite {
		return terminationOutput(reason, "its workers kept vanishing before the run got further")
	}
	if r.PendingEffect == "" {
		return terminationOutput(reason, "a write of the run may or may not have taken effect: its worker vanished after it and before the run recorded it, and a write is never made twice")
	}
	tool := ""
	for _, c := range r.PendingCalls {
		if c.ID == r.PendingEffect {
			tool = c.Tool
		}
	}
	return terminationOutput(reason, writeCallName(r.PendingEffect, tool)+" may or may not have taken effect: the run's worker vanished while it was under way, and a write is never made twice")
}
