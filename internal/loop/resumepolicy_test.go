package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// freezeWrites is the policy an operator deploys to stop every write: a
// deny rule on write_doc and delete_doc; the rest keeps its own trigger.
var freezeWrites = byTool(map[string]loop.Verdict{
	"write_doc":  {Action: loop.VerdictDeny, Rule: "freeze", Message: "writes are frozen for the incident"},
	"delete_doc": {Action: loop.VerdictDeny, Rule: "freeze", Message: "writes are frozen for the incident"},
})

// holdTurn runs a runner with the default policy (byTool of nothing) on
// one turn, which it holds, and returns the runner, the state and the log.
func holdTurn(t *testing.T, turn loop.Message) (*loop.Runner, *loop.SuspendedState, *execLog) {
	t.Helper()
	log := &execLog{}
	r := newRunner(t, scriptModel(turn, asst(say("done"))), log)
	r.Policy = byTool(nil)
	out, err := r.Run(t.Context(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	return r, out.Suspended, log
}

// TestADenyRuleDeployedSinceTheHoldStopsAnApprovedCall: a held write that
// its approver approved does not run when the policy in force at the
// resume (an emergency freeze deployed while it waited) has a deny rule
// for it: the model gets the rule's message as for any policy denial, a
// tool_denied step names the rule, says it was at the resume and names the
// rule the call was held under, and the rest of the turn goes on (its read
// runs, the model answers, the run completes: a policy denial is nobody's
// decision, so denial_ends_run does not end the run). Before, the approved
// write ran whatever policy was deployed since. Per-call decisions (what
// votes come to) resume through the same path, and an edited call is
// judged on its edited input.
func TestADenyRuleDeployedSinceTheHoldStopsAnApprovedCall(t *testing.T) {
	turn := asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"notes","text":"x"}`))
	const freezeMsg = "writes are frozen for the incident"
	for _, tt := range []struct {
		name     string
		decision func(st *loop.SuspendedState) loop.Decision
		// policy is the policy in force at the resume; rule and message
		// what it denies the write with.
		policy        loop.Policy
		rule, message string
	}{
		{"whole-turn approve", func(st *loop.SuspendedState) loop.Decision {
			return loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove}
		}, freezeWrites, "freeze", freezeMsg},
		{"per-call approve, as votes decide", func(st *loop.SuspendedState) loop.Decision {
			return loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove}}}
		}, freezeWrites, "freeze", freezeMsg},
		// byPath holds "notes" under its default rule and denies prod/:
		// the edited input is what is judged.
		{"edit into a path a rule now denies", func(st *loop.SuspendedState) loop.Decision {
			return loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"prod/site","text":"y"}`)}}}
		}, byPath, "no-prod", "production is never written by an agent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, st, log := holdTurn(t, turn)
			require.Equal(t, "default", st.PendingCalls[1].Rule)
			digest := st.TurnDigest
			st.Options.DenialEndsRun = true // an approver's denial would end the run

			// The worker that resumes has the new policy deployed.
			r.Policy = tt.policy
			var steps []loop.Step
			r.Hooks.OnStep = func(_ context.Context, s loop.Step) error { steps = append(steps, s); return nil }
			out, err := r.Resume(t.Context(), st, tt.decision(st))
			require.NoError(t, err)
			assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list(), "the read runs; the approved write does not")
			assert.Equal(t, loop.ReasonCompleted, out.Reason, "the run goes on")
			assert.Equal(t, "done", out.FinalText)
			checkTranscript(t, out.Transcript)
			res, ok := resultFor(out.Transcript, "w1")
			require.True(t, ok)
			assert.True(t, res.IsError)
			assert.Equal(t, `Error: tool "write_doc" was denied by policy rule "`+tt.rule+`": `+tt.message, res.Content)

			var denied []loop.Step
			for _, s := range steps {
				if s.Kind == loop.StepToolDenied {
					denied = append(denied, s)
				}
			}
			require.Len(t, denied, 1)
			d := denied[0]
			assert.Equal(t, "w1", d.CallID)
			assert.Equal(t, tt.rule, d.Rule)
			assert.True(t, d.DeniedAtResume)
			assert.Equal(t, "default", d.HeldRule)
			assert.Equal(t, `denied at resume by policy rule "`+tt.rule+`" of the policy in force then (when the turn was held, rule "default" judged it; the decision let it run): `+tt.message, d.Detail)
			assert.Equal(t, digest, st.TurnDigest, "the state is not changed")
			assert.Empty(t, st.PendingCalls[1].Denied, "the state is not changed")
		})
	}
}

// TestOnlyADenyCountsAtResume: at a resume, the policy in force only
// stops calls: an allow rule deployed since neither lifts a decision's
// denial nor a denial the policy gave when the turn was held, and a
// require_approval rule deployed since (other approvers, a quorum) does
// not hold an approved call again: it runs as decided. A sibling read that
// a deny rule deployed since refuses does not run either.
func TestOnlyADenyCountsAtResume(t *testing.T) {
	turn := asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"notes","text":"x"}`),
		use("w2", "write_doc", `{"path":"drafts/a","text":"x"}`), use("p1", "write_doc", `{"path":"prod/site","text":"x"}`))
	hold := func(t *testing.T) (*loop.Runner, *loop.SuspendedState, *execLog) {
		t.Helper()
		log := &execLog{}
		r := newRunner(t, scriptModel(turn, asst(say("done"))), log)
		r.Policy = byPath
		out, err := r.Run(t.Context(), request("go"))
		require.NoError(t, err)
		require.Equal(t, loop.OutcomeSuspended, out.Kind)
		return r, out.Suspended, log
	}
	allowAll := func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "open"}
	}
	askFinance := func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "finance", Approval: &loop.ApprovalRule{Approvers: []string{"group:finance"}, RequiredApprovals: 3}}
	}
	denyReads := byTool(map[string]loop.Verdict{"read_doc": {Action: loop.VerdictDeny, Rule: "no-reads", Message: "reads are off"}})

	t.Run("an allow deployed since lifts no denial", func(t *testing.T) {
		r, st, log := hold(t)
		r.Policy = allowAll
		out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionDeny, Message: "not now"}}})
		require.NoError(t, err)
		assert.Equal(t, []string{`read_doc({"path":"a"})`, `write_doc({"path":"drafts/a","text":"x"})`}, log.list(),
			"the denied write and the write the policy refused at the hold stay unrun")
		res, _ := resultFor(out.Transcript, "p1")
		assert.Contains(t, res.Content, `denied by policy rule "no-prod"`)
		res, _ = resultFor(out.Transcript, "w1")
		assert.Contains(t, res.Content, "denied by the approver: not now")
	})
	t.Run("a require_approval deployed since holds nothing again", func(t *testing.T) {
		r, st, log := hold(t)
		r.Policy = askFinance
		out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.NoError(t, err)
		assert.Equal(t, loop.ReasonCompleted, out.Reason)
		assert.Equal(t, []string{`read_doc({"path":"a"})`, `write_doc({"path":"notes","text":"x"})`, `write_doc({"path":"drafts/a","text":"x"})`}, log.list())
	})
	t.Run("a deny deployed since stops a sibling read", func(t *testing.T) {
		r, st, log := hold(t)
		r.Policy = denyReads
		out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.NoError(t, err)
		assert.Equal(t, []string{`write_doc({"path":"notes","text":"x"})`, `write_doc({"path":"drafts/a","text":"x"})`}, log.list())
		res, _ := resultFor(out.Transcript, "r1")
		assert.Contains(t, res.Content, `denied by policy rule "no-reads": reads are off`)
	})
}

// TestADenialAtResumeTravelsInTheCheckpoint: a resumed turn that yields
// after its first call is continued from its checkpoint, by a process
// whose policy would let everything run: the call the policy in force at
// the resume refused stays refused (a build that does not know the
// denied_at_resume mark still reads the call's denial).
func TestADenialAtResumeTravelsInTheCheckpoint(t *testing.T) {
	r, st, log := holdTurn(t, asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"notes","text":"x"}`)))
	r.Policy = freezeWrites
	yields := 0
	r.Hooks.Yield = func(context.Context) bool { yields++; return yields == 1 }
	out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind)
	blob, err := out.Checkpoint.Encode()
	require.NoError(t, err)
	cp, err := loop.DecodeCheckpoint(blob)
	require.NoError(t, err)
	require.Equal(t, 1, cp.Turn.Done)
	assert.True(t, cp.Turn.Calls[1].DeniedAtResume)
	assert.Equal(t, "writes are frozen for the incident", cp.Turn.Calls[1].Denied)

	r.Policy = func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "open"}
	}
	r.Hooks.Yield = nil
	out, err = r.Continue(t.Context(), cp)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list())
	res, _ := resultFor(out.Transcript, "w1")
	assert.Contains(t, res.Content, `denied by policy rule "freeze"`)
}

// TestATakenOverResumeMakesItsIdempotentWritesAgain: a worker that took a
// resume over from one that vanished with a write's fence stamped
// (Runner.TakenOverAt) makes the held turn's idempotent writes up to that
// call, in turn order, again under their keys without judging them again
// (the vanished worker may have made them: a denial would say that a write
// did not run which may have); the calls after it, which that worker never
// began, and its writes that are not idempotent (one it made would have
// ended the run instead) are judged by the policy in force. A fence on no
// call of the turn leaves every idempotent write unjudged.
func TestATakenOverResumeMakesItsIdempotentWritesAgain(t *testing.T) {
	turn := asst(use("d1", "delete_doc", `{"path":"old"}`), use("w1", "write_doc", `{"path":"notes","text":"x"}`), use("d2", "delete_doc", `{"path":"older"}`))
	for _, tt := range []struct {
		name, fence string
		want        []string
	}{
		{"not taken over", "", nil},
		{"fenced at the first call", "d1", []string{`delete_doc({"path":"old"})`}},
		{"fenced at the last call", "d2", []string{`delete_doc({"path":"old"})`, `delete_doc({"path":"older"})`}},
		{"fenced at no call of the turn", "x9", []string{`delete_doc({"path":"old"})`, `delete_doc({"path":"older"})`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, st, log := holdTurn(t, turn)
			r.Policy = freezeWrites
			r.TakenOverAt = tt.fence
			out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
			require.NoError(t, err)
			assert.Equal(t, loop.ReasonCompleted, out.Reason)
			assert.Equal(t, tt.want, nilIfEmpty(log.list()))
			res, _ := resultFor(out.Transcript, "w1")
			assert.Contains(t, res.Content, `denied by policy rule "freeze"`, "a write that is not idempotent never ran before: judged")
		})
	}
}

// TestTheDenialsAtResumeAreStoredBeforeAnyCallRuns: when the policy in
// force at the resume denies a call, Hooks.ResumeDenied gets the turn with
// that denial and none of its calls done, before any call runs (the
// worker stores it: a process that takes the run over continues from it);
// a process continuing from it with a policy that allows everything does
// not run the denied call. A hook that fails runs nothing of the turn, and
// a resume that denies nothing does not call it.
func TestTheDenialsAtResumeAreStoredBeforeAnyCallRuns(t *testing.T) {
	turn := asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"notes","text":"x"}`), use("d1", "delete_doc", `{"path":"old"}`))
	freezeDeletes := byTool(map[string]loop.Verdict{"delete_doc": {Action: loop.VerdictDeny, Rule: "freeze", Message: "deletes are frozen"}})

	r, st, log := holdTurn(t, turn)
	r.Policy = freezeDeletes
	var stored []byte
	r.Hooks.ResumeDenied = func(_ context.Context, cp *loop.Checkpoint) error {
		assert.Empty(t, log.list(), "no call ran before the denials are stored")
		var err error
		stored, err = cp.Encode()
		return err
	}
	out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`read_doc({"path":"a"})`, `write_doc({"path":"notes","text":"x"})`}, log.list())
	require.NotNil(t, stored, "the denial is handed over to be stored")
	cp, err := loop.DecodeCheckpoint(stored)
	require.NoError(t, err)
	require.NotNil(t, cp.Turn)
	assert.Zero(t, cp.Turn.Done)
	require.Len(t, cp.Turn.Calls, 3)
	assert.True(t, cp.Turn.Calls[2].DeniedAtResume)
	assert.Equal(t, "deletes are frozen", cp.Turn.Calls[2].Denied)

	// A process that takes over from what was stored, under a policy that
	// lets everything run, makes the turn's calls but the denied one.
	log2 := &execLog{}
	r2 := newRunner(t, scriptModel(turn, asst(say("done"))), log2)
	r2.Policy = func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "open"}
	}
	out, err = r2.Continue(t.Context(), cp)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`read_doc({"path":"a"})`, `write_doc({"path":"notes","text":"x"})`}, log2.list())
	res, _ := resultFor(out.Transcript, "d1")
	assert.Contains(t, res.Content, `denied by policy rule "freeze": deletes are frozen`)

	t.Run("a hook that fails runs nothing", func(t *testing.T) {
		r, st, log := holdTurn(t, turn)
		r.Policy = freezeDeletes
		r.Hooks.ResumeDenied = func(context.Context, *loop.Checkpoint) error { return errors.New("store down") }
		_, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.ErrorContains(t, err, "store down")
		assert.Empty(t, log.list())
	})
	t.Run("nothing denied, nothing to store", func(t *testing.T) {
		r, st, log := holdTurn(t, turn)
		r.Policy = byTool(nil)
		r.Hooks.ResumeDenied = func(context.Context, *loop.Checkpoint) error {
			t.Error("called though nothing was denied")
			return nil
		}
		out, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.NoError(t, err)
		assert.Equal(t, loop.ReasonCompleted, out.Reason)
		assert.Len(t, log.list(), 3)
	})
}

// TestADenialAtResumeIsReadByABuildThatDoesNotKnowTheMark: a checkpoint
// holding a call denied at resume, with the denied_at_resume and
// held_rule members removed (as the release before this one reads it),
// is continued without running that call: the denial itself is what a
// build reads.
func TestADenialAtResumeIsReadByABuildThatDoesNotKnowTheMark(t *testing.T) {
	turn := asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"notes","text":"x"}`))
	r, st, log := holdTurn(t, turn)
	r.Policy = freezeWrites
	var stored []byte
	r.Hooks.ResumeDenied = func(_ context.Context, cp *loop.Checkpoint) error {
		var err error
		stored, err = cp.Encode()
		return err
	}
	_, err := r.Resume(t.Context(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.NotNil(t, stored)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(stored, &raw))
	calls := raw["turn"].(map[string]any)["calls"].([]any)
	w1 := calls[1].(map[string]any)
	require.Equal(t, true, w1["denied_at_resume"])
	delete(w1, "denied_at_resume")
	delete(w1, "held_rule")
	old, err := json.Marshal(raw)
	require.NoError(t, err)
	cp, err := loop.DecodeCheckpoint(old)
	require.NoError(t, err)

	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list())

	// The release before judges nothing at resume: no policy.
	log2 := &execLog{}
	r2 := newRunner(t, scriptModel(turn, asst(say("done"))), log2)
	out, err := r2.Continue(t.Context(), cp)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log2.list())
	res, _ := resultFor(out.Transcript, "w1")
	assert.Contains(t, res.Content, `denied by policy rule "freeze"`)
}
