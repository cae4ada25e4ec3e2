package embedded

import (
	"path/filepath"
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
