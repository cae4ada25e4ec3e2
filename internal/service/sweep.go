package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Reasons the sweep ends runs with.
const (
	// ReasonWorkerLost ends a run whose worker vanished mid-segment with no
	// write in flight.
	ReasonWorkerLost = "worker_lost"
)

// SweepSummary counts what one sweep did.
type SweepSummary struct {
	Scanned      int `json:"scanned"`
	Expired      int `json:"expired"`
	Redispatched int `json:"redispatched"`
	Reaped       int `json:"reaped"`
	Interrupted  int `json:"interrupted_writes"`
	Purged       int `json:"purged"`
	Reminded     int `json:"reminded"`
	Skipped      int `json:"skipped"`
	Errors       int `json:"errors"`
	// More is set when the sweep stopped at its bound with due work left.
	More bool `json:"more"`
}

// Sweeper is the scheduled purge: one pass over the due index that expires
// approvals past their deadline, reaps runs whose worker lease expired,
// re-dispatches QUEUED/RESUMING runs whose dispatch was lost, and deletes
// settled runs past retention. Work per sweep is bounded by MaxRuns; what is
// left is due on the next tick.
type Sweeper struct {
	Store    *runs.Store
	Dispatch Dispatcher
	// Remind, when set, sends the reminder for a waiting run (80% of the window).
	Remind  func(ctx context.Context, r *runs.Run) error
	MaxRuns int
	Logger  *slog.Logger
	Now     func() time.Time
}

// Sweep runs one pass and logs a summary line.
func (s *Sweeper) Sweep(ctx context.Context) (SweepSummary, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
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
	at := now()
	for {
		page, next, err := s.Store.Due(ctx, at, min(100, maxRuns-sum.Scanned), cursor)
		if err != nil {
			log.ErrorContext(ctx, "sweep: due query failed", "err", err)
			return sum, fmt.Errorf("sweep: %w", err)
		}
		for _, r := range page {
			sum.Scanned++
			if err := s.one(ctx, r, at, &sum); err != nil {
				sum.Errors++
				log.WarnContext(ctx, "sweep: run not handled", "run_id", r.ID, "status", r.Status, "err", err)
			}
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
	log.InfoContext(ctx, "sweep done", "scanned", sum.Scanned, "expired", sum.Expired, "redispatched", sum.Redispatched,
		"reaped", sum.Reaped, "interrupted_writes", sum.Interrupted, "purged", sum.Purged, "reminded", sum.Reminded,
		"skipped", sum.Skipped, "errors", sum.Errors, "more", sum.More)
	return sum, nil
}

func (s *Sweeper) one(ctx context.Context, r *runs.Run, now time.Time, sum *SweepSummary) error {
	switch {
	case r.Status == runs.StatusWaiting && !now.Before(r.ApprovalDeadline):
		if _, err := s.Store.Expire(ctx, r); err != nil {
			return skipConflict(err, sum)
		}
		sum.Expired++
	case r.Status == runs.StatusWaiting:
		if s.Remind == nil || r.ReminderSent {
			sum.Skipped++
			return nil
		}
		if err := s.Remind(ctx, r); err != nil {
			return err
		}
		sum.Reminded++
	case r.Status == runs.StatusQueued || r.Status == runs.StatusResuming:
		kind := JobRun
		if r.Status == runs.StatusResuming {
			kind = JobResume
		}
		if err := s.Dispatch.Dispatch(ctx, Job{Kind: kind, RunID: r.ID}); err != nil {
			return err
		}
		sum.Redispatched++
	case r.Status == runs.StatusRunning && r.LeaseExpired(now):
		// The worker vanished. A stamped fence means a write may or may not
		// have happened: never re-execute it. Without one, the segment
		// cannot be replayed safely either (its earlier writes are not
		// recorded as results), so the run ends FAILED for an operator.
		reason := ReasonWorkerLost
		if r.PendingEffect != "" {
			reason = ReasonInterruptedWriteStr
		}
		if _, err := s.Store.Settle(ctx, r, "", runs.Outcome{Status: runs.StatusFailed, Reason: reason}); err != nil {
			return skipConflict(err, sum)
		}
		if reason == ReasonInterruptedWriteStr {
			sum.Interrupted++
		} else {
			sum.Reaped++
		}
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

// ReasonInterruptedWriteStr is loop.ReasonInterruptedWrite as the run row stores it.
const ReasonInterruptedWriteStr = "interrupted_write"

func skipConflict(err error, sum *SweepSummary) error {
	if runs.ErrorCode(err) == runs.EConflict || runs.ErrorCode(err) == runs.ENotFound {
		sum.Skipped++
		return nil
	}
	return err
}
