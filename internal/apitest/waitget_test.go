package apitest_test

import (
	"fmt"
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
)

// TestGetWaitsForTheNextVersion: a GET /runs/{id} with after_version and
// wait answers with the run once it has moved past the caller's version, so
// a caller waiting for a decision's effect need not poll.
func TestGetWaitsForTheNextVersion(t *testing.T) {
	s := start(t, apitest.Options{})
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"update pricing","approvers":["bob"]}`)
	id := run["id"].(string)
	run = waitStatus(t, s, c, id, "WAITING_FOR_APPROVAL")
	version := int64(run["version"].(float64))
	digest := run["pending"].(map[string]any)["turn_digest"].(string)

	type answer struct {
		status int
		run    map[string]any
	}
	got := make(chan answer, 1)
	go func() {
		status, r, _ := call(t, s, c, "GET", fmt.Sprintf("/runs/%s?after_version=%d&wait=20", id, version), "alice", "", "")
		got <- answer{status, r}
	}()
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "bob", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 202 {
		t.Fatalf("decide: %d %v", status, out)
	}
	a := <-got
	if a.status != 200 || int64(a.run["version"].(float64)) <= version {
		t.Fatalf("waiting GET after version %d: %d %v", version, a.status, a.run)
	}
	if a.run["status"] == "WAITING_FOR_APPROVAL" {
		t.Errorf("the waiting GET answered with the run it was told the caller has: %v", a.run)
	}

	// Waiting on an ended run answers at once with it.
	done := waitStatus(t, s, c, id, "COMPLETED")
	status, r, _ := call(t, s, c, "GET", fmt.Sprintf("/runs/%s?after_version=%d&wait=20", id, int64(done["version"].(float64))), "alice", "", "")
	if status != 200 || r["status"] != "COMPLETED" {
		t.Errorf("waiting GET on a completed run: %d %v", status, r)
	}
}
