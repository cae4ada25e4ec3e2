package client_test

import (
	"slices"
	"testing"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
)

// inbox reads c's whole inbox through the iterator.
func inbox(t *testing.T, c *client.Client) []client.PendingApproval {
	t.Helper()
	var out []client.PendingApproval
	for a, err := range c.PendingApprovals(ctx(t)) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func runIDs(as []client.PendingApproval) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.RunID)
	}
	return out
}

// TestPendingApprovals: the inbox lists what waits for the caller, newest
// first, across pages; an entry leaves it when the run is decided or
// cancelled; the initiator of a four-eyes run is not listed.
func TestPendingApprovals(t *testing.T) {
	s := apitest.Start(t, apitest.Options{Principals: []string{"alice", "Bob", "carol"}})
	alice, bob, carol := newClient(t, s, "alice"), newClient(t, s, "Bob"), newClient(t, s, "carol")
	c := ctx(t)
	var started []*client.Run
	for i, approvers := range [][]string{{"bob"}, {"bob", "carol"}, {"carol"}, {"BOB", "alice"}} {
		req := client.StartRunRequest{Prompt: "update pricing", Approvers: approvers, FourEyes: client.Bool(i == 3)}
		r, err := alice.StartRun(c, req)
		if err != nil {
			t.Fatal(err)
		}
		if r, err = alice.Wait(c, r.ID, client.StatusWaiting); err != nil {
			t.Fatal(err)
		}
		started = append(started, r)
	}

	got := inbox(t, bob)
	if want := []string{started[3].ID, started[1].ID, started[0].ID}; !slices.Equal(runIDs(got), want) {
		t.Fatalf("bob's inbox %v, want %v (newest first; local names match whatever their case)", runIDs(got), want)
	}
	first := got[2]
	if first.Initiator != "alice" || first.Purpose != "update pricing" || !slices.Equal(first.Tools, []string{"write_document"}) ||
		first.VotesNeeded != 1 || first.VotesMissing != 1 || first.TurnDigest != started[0].Pending.TurnDigest || !first.Deadline.Equal(started[0].Pending.Deadline) ||
		first.SuspensionID != started[0].Pending.SuspensionID || first.SuspendedAt.IsZero() {
		t.Errorf("entry %+v, want the suspension of run %+v", first, started[0].Pending)
	}
	if got := inbox(t, alice); len(got) != 0 {
		t.Errorf("alice's inbox %v: she is an approver only of her own four-eyes run", runIDs(got))
	}

	// Pages of one: the same entries, each once.
	paged, err := client.New(s.URL, client.WithBearerToken(s.Token("Bob")), client.WithHTTPClient(s.Client(t)), client.WithPageSize(1))
	if err != nil {
		t.Fatal(err)
	}
	if p := inbox(t, paged); !slices.Equal(runIDs(p), runIDs(got)) {
		t.Errorf("paged inbox %v, want %v", runIDs(p), runIDs(got))
	}
	page, err := paged.PendingApprovalsPage(c, "", 1)
	if err != nil || len(page.Approvals) != 1 || page.NextCursor == "" {
		t.Fatalf("first page of one: %+v %v", page, err)
	}
	if _, err := carol.PendingApprovalsPage(c, page.NextCursor, 1); client.ErrorCode(err) != client.CodeUnprocessable {
		t.Errorf("carol with bob's cursor: %v, want code %s", err, client.CodeUnprocessable)
	}

	if _, err := carol.Decide(c, started[1].ID, client.ApproveTurn(started[1].Pending.TurnDigest)); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Cancel(c, started[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := runIDs(inbox(t, bob)); !slices.Equal(got, []string{started[3].ID}) {
		t.Errorf("bob's inbox after a decision and a cancel: %v, want %v", got, []string{started[3].ID})
	}
	if got := runIDs(inbox(t, carol)); !slices.Equal(got, []string{started[2].ID}) {
		t.Errorf("carol's inbox: %v, want %v", got, []string{started[2].ID})
	}
}

// TestPageSizeIsCappedPerRoute: WithPageSize above a route's largest page
// is capped for that route, so both iterators work with a size only the
// events route allows.
func TestPageSizeIsCappedPerRoute(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	alice := newClient(t, s, "alice")
	c := ctx(t)
	r, err := alice.StartRun(c, client.StartRunRequest{Prompt: "update pricing", Approvers: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Wait(c, r.ID, client.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{client.MaxApprovalsPageSize + 1, 500, client.MaxEventsPageSize + 1} {
		bob, err := client.New(s.URL, client.WithBearerToken(s.Token("bob")), client.WithHTTPClient(s.Client(t)), client.WithPageSize(size))
		if err != nil {
			t.Fatal(err)
		}
		if got := inbox(t, bob); len(got) != 1 || got[0].RunID != r.ID {
			t.Errorf("page size %d: inbox %v, want [%s]", size, runIDs(got), r.ID)
		}
		n := 0
		for _, err := range bob.Events(c, r.ID, 0) {
			if err != nil {
				t.Fatalf("page size %d: events: %v", size, err)
			}
			n++
		}
		if n == 0 {
			t.Errorf("page size %d: no events", size)
		}
	}
}
