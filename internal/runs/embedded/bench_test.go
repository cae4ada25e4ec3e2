package embedded

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// BenchmarkSuspendDecideClaimLoad times the approval round trip of one run on
// the embedded store (each write is one fsync'd bbolt transaction; one writer, so no group commit).
func BenchmarkSuspendDecideClaimLoad(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "agentgate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	e := runstest.NewEnv(b, runstest.Harness{Rows: db, States: db})
	ctx := b.Context()
	for b.Loop() {
		b.StopTimer()
		r := e.Running(b)
		sp, _ := e.Suspension(r, "s1")
		b.StartTimer()
		r, err := e.Store.Suspend(ctx, r, "w1", sp)
		if err == nil {
			r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: runstest.Approve})
		}
		if err == nil {
			r, err = e.Store.Claim(ctx, r.ID, "w2")
		}
		if err == nil {
			_, err = e.Store.LoadState(ctx, r)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApprovalRoundsWriters drives whole approval rounds on one store
// (create, claim, suspend with tokens and inbox entries, decide, claim
// again, settle: six row writes, the suspension's state blob and the
// settle's blob deletion) from 1 and 16 concurrent writers. Rounds/s at 16
// over rounds/s at 1 is what the group commit buys the store alone, without
// HTTP, the loop or the clients' polls (cmd/agentgate's
// BenchmarkRunDecisionCycleClients measures the whole server). Two counts
// explain it whatever the machine's load: writes/commit (the group's batch)
// and pages/write (pages bbolt wrote, each a pwrite, all fsync'd before the
// commit returns; a commit's time grows with them).
func BenchmarkApprovalRoundsWriters(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "agentgate.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			e := runstest.NewEnv(b, runstest.Harness{Rows: db, States: db})
			ctx := b.Context()
			round := func() error {
				r := e.Queued(b)
				r, err := e.Store.Claim(ctx, r.ID, "w1")
				if err != nil {
					return err
				}
				sp, _ := e.Suspension(r, "s1")
				if r, err = e.Store.Suspend(ctx, r, "w1", sp); err != nil {
					return err
				}
				if r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: runstest.Approve}); err != nil {
					return err
				}
				if r, err = e.Store.Claim(ctx, r.ID, "w2"); err != nil {
					return err
				}
				_, err = e.Store.Settle(ctx, r, "w2", runs.Settlement{Status: runs.StatusCompleted, Output: json.RawMessage(`{"text":"done"}`)})
				return err
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := round(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rounds/s")
			b.ReportMetric(float64(db.group.writes.Load())/float64(max(db.group.commits.Load(), 1)), "writes/commit")
			st := db.bolt.Stats()
			b.ReportMetric(float64(st.TxStats.GetWrite())/float64(max(db.group.writes.Load(), 1)), "pages/write")
		})
	}
}
