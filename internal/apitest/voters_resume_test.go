package apitest_test

// A turn that a directory change leaves decided by the votes already cast,
// though the run still waits, is resumed by the next vote (reviewer
// helper-99 R5, helper-103 D and E, helper-105 F2 and F3). Each test
// failed before its fix.

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// frankDirectory is a directory in which frank has frankAliases, and bob
// and carol their own.
func frankDirectory(frankAliases string) string {
	return `{"version": 1, "persons": [
  {"id": "frank", "aliases": [` + frankAliases + `]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]}]}`
}

// undoneChange plays a directory change that is undone, on servers that
// server starts on one store: a four-eyes run of frank's needs 2 of
// frank-ci, bob and carol. frank-ci (no entry) votes; the directory then
// makes frank-ci frank's, under which that vote approves nothing
// (four-eyes; GET /runs/{id} counts 0), and bob votes (1 of 2: the run
// waits); the directory is then put back. It returns the server under the
// directory put back, where the two votes decide the turn though the run
// waits, with the run's id, an approval of its turn and carol's link.
func undoneChange(t *testing.T, server func(dir, directory string) *apitest.Server) (third *apitest.Server, id, approve, carolLink string) {
	t.Helper()
	without, with := frankDirectory(`"frank@example.com", "frank"`), frankDirectory(`"frank@example.com", "frank", "frank-ci"`)
	first := server("", without)
	id, approve = heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["frank-ci","bob","carol"],"required_approvals":2,"four_eyes":true}`)
	carolLink = first.WaitLinks(t, "carol@example.com", 1)[0]
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "frank-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, with)
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "bob", "", "")
	approval := got["pending"].(map[string]any)["calls"].([]any)[0].(map[string]any)["approval"].(map[string]any)
	require.Equal(t, float64(0), approval["approvals"], "frank-ci's vote approves nothing under this directory, as the store counts it")
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, "WAITING_FOR_APPROVAL", out["status"])
	second.Stop()
	return server(first.Dir, without), id, approve, carolLink
}

// oneCallServers are voterServers for undoneChange's principals.
func oneCallServers(t *testing.T) func(dir, directory string) *apitest.Server {
	server, _ := voterServers(t, []string{"frank", "frank-ci", "bob", "carol"})
	return server
}

// TestAVoteResumesATurnTheVotesDecideAfterADirectoryChange (R5): carol's
// API vote resumes the turn (before: 409 "every call ... is already
// approved" to everyone, and the run could only expire).
func TestAVoteResumesATurnTheVotesDecideAfterADirectoryChange(t *testing.T) {
	third, id, approve, _ := undoneChange(t, oneCallServers(t))
	code, out := whCall(t, third, "POST", "/runs/"+id+"/decision", "carol", approve)
	require.Equal(t, http.StatusAccepted, code, "the votes decide the turn: carol's vote resumes it: %v", out)
	third.App.Dispatcher.Wait()
	waitAs(t, third, third.Client(t), "bob", id, "COMPLETED")
}

// TestALinkVoteResumesATurnTheVotesDecideAfterADirectoryChange (E): the
// same through carol's link: the page offers her the form (not "every
// call you may decide was already decided"), and her vote resumes the
// turn.
func TestALinkVoteResumesATurnTheVotesDecideAfterADirectoryChange(t *testing.T) {
	third, id, _, carolLink := undoneChange(t, oneCallServers(t))
	c := third.Client(t)
	p := third.As(t, "").Call(t, "GET", linkPath(t, carolLink), "", "")
	require.Equal(t, http.StatusOK, p.Status, string(p.Body))
	require.Contains(t, string(p.Body), "<form", "carol's vote resumes the turn")
	_, got, _ := call(t, third, c, "GET", "/runs/"+id, "bob", "", "")
	digest := got["pending"].(map[string]any)["turn_digest"].(string)
	status, _, _ := call(t, third, c, "POST", linkPath(t, carolLink), "", formCT, form("digest", digest, "action", "approve"))
	require.Equal(t, http.StatusOK, status)
	third.App.Dispatcher.Wait()
	waitAs(t, third, c, "bob", id, "COMPLETED")
}

// TestAVoteThatOnlyResumesATurnIsNotItsDecision (D, F2; reviewer
// helper-108 F2, F3): a denial of the turn the votes approve would count
// for nothing, so it is refused (409) rather than taken while the write
// runs; carol's approval only resumes the turn. The decision is the
// votes': decided_by, its time and the decision event's actor are bob's
// (the last vote that decided a call; its time is the resumption's, as
// the decision event's), and her vote is kept and recorded with no choice (before: decided_by carol, her vote shown as an approval
// with her denial's message, and its event as a denial).
func TestAVoteThatOnlyResumesATurnIsNotItsDecision(t *testing.T) {
	third, id, approve, _ := undoneChange(t, oneCallServers(t))
	deny := strings.Replace(approve, `"approve"`, `"deny","message":"no"`, 1)
	code, out := whCall(t, third, "POST", "/runs/"+id+"/decision", "carol", deny)
	require.Equal(t, http.StatusConflict, code, "a denial would count for nothing: %v", out)
	code, out = whCall(t, third, "POST", "/runs/"+id+"/decision", "carol", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	decision := out["decision"].(map[string]any)
	assert.Equal(t, "bob", decision["by"], "the decision is the votes', the last of which was bob's")
	votes := out["votes"].([]any)
	carols := votes[len(votes)-1].(map[string]any)
	assert.Equal(t, "carol", carols["by"])
	assert.Empty(t, carols["action"], "carol's vote chose nothing: it only resumed the turn")
	evs, err := third.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	for _, e := range evs {
		switch e.Type {
		case runs.EventDecision:
			assert.Equal(t, "bob", e.Actor, "the decision event's actor, as decided_by")
			assert.Contains(t, string(e.Data), `"resumed_by":"carol"`, "and who resumed it")
		case runs.EventVote:
			if e.Actor == "carol" {
				assert.NotContains(t, string(e.Data), `"action":"approve"`, "carol's vote chose nothing: %s", e.Data)
			}
		}
	}
}

// TestAPerCallLinkVoteResumesATurnTheVotesDecide (F3): on a turn of two
// calls, the link page offers carol per-call choices on both, and her
// per-call vote resumes the turn (before: 403 "not yours to decide", the
// POST checking the choices against the open calls, none).
func TestAPerCallLinkVoteResumesATurnTheVotesDecide(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	third, id, _, carolLink := undoneChange(t, func(dir, directory string) *apitest.Server {
		return apitest.Start(t, apitest.Options{Now: clock.Now, Validator: validator, Principals: []string{"frank", "frank-ci", "bob", "carol"},
			Dir: dir, Rows: db, States: db,
			Script:     script(toolUse("w1", "write_document", `{"path":"pages/a.md","text":"a"}`), toolUse("w2", "write_document", `{"path":"pages/b.md","text":"b"}`)),
			Governance: governance(t, directory, "")})
	})
	c := third.Client(t)
	p := third.As(t, "").Call(t, "GET", linkPath(t, carolLink), "", "")
	require.Equal(t, http.StatusOK, p.Status, string(p.Body))
	require.Contains(t, string(p.Body), "call.w2", "the page offers per-call choices")
	_, got, _ := call(t, third, c, "GET", "/runs/"+id, "bob", "", "")
	digest := got["pending"].(map[string]any)["turn_digest"].(string)
	status, body, _ := call(t, third, c, "POST", linkPath(t, carolLink), "", formCT, form("digest", digest, "action", "per_call", "call.w1", "approve", "call.w2", "approve"))
	assert.Equal(t, http.StatusOK, status, "%v", body)
}

// TestALinkVoteThatOnlyResumesATurnSaysWhatTheVotesDecided (reviewer
// helper-106 N3, helper-108 F2, F3): carol's link page says, before she
// votes, that the votes decided the turn and an approval resumes it; her
// denial is refused (409), her approval resumes the run, and the page she
// gets back says what the votes decided (on 7593ece a denial was taken,
// the page said "Denied. The agent is told its calls were not allowed."
// and the write ran). Her link, opened afterwards, does not call her vote
// one that counted.
func TestALinkVoteThatOnlyResumesATurnSaysWhatTheVotesDecided(t *testing.T) {
	third, id, _, carolLink := undoneChange(t, oneCallServers(t))
	c := third.Client(t)
	p := third.As(t, "").Call(t, "GET", linkPath(t, carolLink), "", "")
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, string(p.Body), "Already decided by the votes")
	_, got, _ := call(t, third, c, "GET", "/runs/"+id, "bob", "", "")
	digest := got["pending"].(map[string]any)["turn_digest"].(string)
	p = third.As(t, "").Call(t, "POST", linkPath(t, carolLink), formCT, form("digest", digest, "action", "deny", "message", "no"))
	require.Equal(t, http.StatusConflict, p.Status, string(p.Body))
	p = third.As(t, "").Call(t, "POST", linkPath(t, carolLink), formCT, form("digest", digest, "action", "approve"))
	require.Equal(t, http.StatusOK, p.Status, string(p.Body))
	assert.Contains(t, string(p.Body), "already decided")
	assert.Contains(t, string(p.Body), "approved")
	third.App.Dispatcher.Wait()
	waitAs(t, third, c, "bob", id, "COMPLETED")
	p = third.As(t, "").Call(t, "GET", linkPath(t, carolLink), "", "")
	assert.NotContains(t, string(p.Body), "Your vote")
}

// TestAResumedDecisionsTimeIsItsEvents (reviewer helper-110 F2): the
// decision's at is when the turn resumed, as its decision event's (which
// the audit and the link pages of an earlier suspension read).
func TestAResumedDecisionsTimeIsItsEvents(t *testing.T) {
	server, clock := voterServers(t, []string{"frank", "frank-ci", "bob", "carol"})
	third, id, approve, _ := undoneChange(t, func(dir, directory string) *apitest.Server {
		clock.Advance(time.Minute)
		return server(dir, directory)
	})
	code, out := whCall(t, third, "POST", "/runs/"+id+"/decision", "carol", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	at := out["decision"].(map[string]any)["at"]
	evs, err := third.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	for _, e := range evs {
		if e.Type == runs.EventDecision {
			assert.Equal(t, at, e.At.UTC().Format(time.RFC3339Nano), "decision.at vs its event's at")
		}
	}
}

// TestTheStoreRefusesADenialThatOnlyResumesATurn (reviewer helper-110
// F3): the store refuses a denial on a turn the votes decide as it finds
// the row, whatever the caller's copy said (a vote by a process on another
// directory, during a deploy, may have decided it since that copy was
// read): it is not taken as a vote that resumes the turn.
func TestTheStoreRefusesADenialThatOnlyResumesATurn(t *testing.T) {
	third, id, _, _ := undoneChange(t, oneCallServers(t))
	r, err := third.App.Store.Get(t.Context(), id)
	require.NoError(t, err)
	dir := third.App.API.Directory
	_, err = third.App.Store.Decide(t.Context(), r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "carol", Voter: runs.SubjectKey(dir, "carol"),
		Via: runs.ViaAPI, Directory: dir, Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionDeny, Message: "no"},
		Choices: []runs.VoteChoice{{CallID: r.PendingCalls[0].ID, Action: loop.ActionDeny, Message: "no"}}})
	assert.Equal(t, runs.EConflict, runs.ErrorCode(err), "%v", err)
	got, err := third.App.Store.Get(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusWaiting, got.Status, "nothing was taken")
}

// TestTheQuorumCheckResumesATurnTheVotesDecide: with nobody voting, the
// sweep's quorum check resumes the turn the votes decide under the
// directory put back (before: nobody was asked any more, and the run
// waited out its window): the decision names the last vote that decided
// the call, and the held write runs once.
func TestTheQuorumCheckResumesATurnTheVotesDecide(t *testing.T) {
	server, clock := voterServers(t, []string{"frank", "frank-ci", "bob", "carol"})
	third, id, _, _ := undoneChange(t, server)
	clock.Advance(time.Hour + time.Minute) // the first quorum check is due an hour after the hold
	sweep(t, third)
	third.App.Dispatcher.Wait()
	got := waitAs(t, third, third.Client(t), "bob", id, "COMPLETED")
	decision := got["decision"].(map[string]any)
	assert.Equal(t, "bob", decision["by"])
	assert.Equal(t, []any{"frank-ci", "bob"}, decision["deciders"])
	evs, err := third.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	resumed := ""
	for _, e := range evs {
		if e.Type == runs.EventDecision {
			var data runs.DecisionEventData
			require.NoError(t, json.Unmarshal(e.Data, &data))
			resumed = data.ResumedBy
		}
	}
	assert.Equal(t, "purge", resumed, "the audit says the quorum check resumed it (reviewer helper-111 F2)")
}
