package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// byTool is a Policy that answers per tool name; tools it does not list keep
// their own trigger (require approval when they need it, else allow).
func byTool(verdicts map[string]loop.Verdict) loop.Policy {
	return func(_ context.Context, q loop.PolicyQuery) loop.Verdict {
		if v, ok := verdicts[q.Call.Name]; ok {
			return v
		}
		if q.RememberedBy != "" && q.Call.NeedsApproval {
			return loop.Verdict{Action: loop.VerdictAllow, Rule: "remembered", ApprovedBy: q.RememberedBy}
		}
		if q.Call.NeedsApproval {
			return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "default"}
		}
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "default"}
	}
}

func TestPolicyVerdicts(t *testing.T) {
	deny := loop.Verdict{Action: loop.VerdictDeny, Rule: "no-deletes", Message: "deletes go through the ticket queue"}
	allow := loop.Verdict{Action: loop.VerdictAllow, Rule: "drafts"}
	ask := loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "two-of-ops",
		Approval: &loop.ApprovalRule{Approvers: []string{"group:ops"}, RequiredApprovals: 2, FourEyes: true, Description: "ops release writes"}}
	tests := []struct {
		name        string
		verdicts    map[string]loop.Verdict
		turn        loop.Message
		wantSuspend bool
		wantExec    []string
		// wantDenied maps call ids denied by policy to their rule.
		wantDenied map[string]string
	}{
		{name: "deny a write: no human asked, the read sibling runs",
			verdicts: map[string]loop.Verdict{"delete_doc": deny},
			turn:     asst(use("r1", "read_doc", `{"path":"a"}`), use("d1", "delete_doc", `{"path":"b"}`)),
			wantExec: []string{`read_doc({"path":"a"})`}, wantDenied: map[string]string{"d1": "no-deletes"}},
		{name: "deny a read",
			verdicts:   map[string]loop.Verdict{"read_doc": deny},
			turn:       asst(use("r1", "read_doc", `{"path":"a"}`)),
			wantDenied: map[string]string{"r1": "no-deletes"}},
		{name: "allow a write without approval",
			verdicts: map[string]loop.Verdict{"write_doc": allow},
			turn:     asst(use("w1", "write_doc", `{"path":"a","text":"x"}`)),
			wantExec: []string{`write_doc({"path":"a","text":"x"})`}},
		{name: "require approval of a read",
			verdicts:    map[string]loop.Verdict{"read_doc": ask},
			turn:        asst(use("r1", "read_doc", `{"path":"a"}`)),
			wantSuspend: true},
		{name: "a denied call and one needing approval: the turn waits, nothing runs",
			verdicts:    map[string]loop.Verdict{"delete_doc": deny},
			turn:        asst(use("d1", "delete_doc", `{"path":"b"}`), use("w1", "write_doc", `{"path":"a","text":"x"}`)),
			wantSuspend: true},
		{name: "an unknown action holds the call (fail closed)",
			verdicts:    map[string]loop.Verdict{"read_doc": {Action: "maybe", Rule: "odd"}},
			turn:        asst(use("r1", "read_doc", `{"path":"a"}`)),
			wantSuspend: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r := newRunner(t, scriptModel(tt.turn, asst(say("done"))), log)
			r.Policy = byTool(tt.verdicts)
			var steps []loop.Step
			r.Hooks.OnStep = func(_ context.Context, st loop.Step) error { steps = append(steps, st); return nil }
			out, err := r.Run(context.Background(), request("go"))
			require.NoError(t, err)
			if tt.wantSuspend {
				require.Equal(t, loop.OutcomeSuspended, out.Kind)
				assert.Empty(t, log.list(), "nothing of a held turn runs")
				return
			}
			require.Equal(t, loop.ReasonCompleted, out.Reason)
			assert.Equal(t, tt.wantExec, nilIfEmpty(log.list()))
			checkTranscript(t, out.Transcript)
			for id, rule := range tt.wantDenied {
				res, ok := resultFor(out.Transcript, id)
				require.True(t, ok)
				assert.True(t, res.IsError)
				assert.Contains(t, res.Content, `denied by policy rule "`+rule+`"`)
				assert.Contains(t, res.Content, "deletes go through the ticket queue")
				found := false
				for _, st := range steps {
					if st.Kind == loop.StepToolDenied && st.CallID == id {
						found = true
						assert.Equal(t, rule, st.Rule)
					}
				}
				assert.True(t, found, "a tool_denied step names the rule")
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestPolicyVerdictTravelsInTheState(t *testing.T) {
	log := &execLog{}
	rule := &loop.ApprovalRule{Approvers: []string{"group:ops"}, RequiredApprovals: 2, FourEyes: true, AlwaysAsk: true, Description: "ops"}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"x"}`), use("d1", "delete_doc", `{"path":"b"}`)), asst(say("done"))), log)
	r.Policy = byTool(map[string]loop.Verdict{
		"write_doc":  {Action: loop.VerdictRequireApproval, Rule: "two-of-ops", Approval: rule},
		"delete_doc": {Action: loop.VerdictDeny, Rule: "no-deletes"},
	})
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	assert.Equal(t, "two-of-ops", st.PendingCalls[0].Rule)
	assert.Equal(t, rule, st.PendingCalls[0].Approval)
	assert.True(t, st.PendingCalls[0].NeedsApproval)
	assert.Equal(t, "no-deletes", st.PendingCalls[1].Rule)
	assert.Equal(t, `denied by policy rule "no-deletes"`, st.PendingCalls[1].Denied)
	assert.False(t, st.PendingCalls[1].NeedsApproval)
	// Round trip: the state encodes the verdict.
	blob, err := st.Encode()
	require.NoError(t, err)
	back, err := loop.DecodeState(blob)
	require.NoError(t, err)
	assert.Equal(t, st.PendingCalls, back.PendingCalls)

	// A per-call decision on the denied call is refused; approving the turn
	// runs the write and still denies the refused call.
	err = loop.ValidateDecision(t.Context(), r.Tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "w1", Action: loop.ActionApprove}, {CallID: "d1", Action: loop.ActionApprove}}})
	require.ErrorIs(t, err, loop.ErrInvalidDecision)
	assert.Contains(t, err.Error(), `call "d1" (delete_doc) was denied by policy rule "no-deletes": it never runs, so it cannot be decided`)
	out, err = r.Resume(context.Background(), back, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, []string{`write_doc({"path":"a","text":"x"})`}, log.list())
	res, _ := resultFor(out.Transcript, "d1")
	assert.True(t, res.IsError)
	checkTranscript(t, out.Transcript)
}

func TestRememberRun(t *testing.T) {
	log := &execLog{}
	turns := []loop.Message{
		asst(use("w1", "write_doc", `{"path":"a","text":"1"}`)),
		asst(use("w2", "write_doc", `{"path":"a","text":"2"}`), use("x1", "delete_doc", `{"path":"z"}`)),
		asst(use("w3", "write_doc", `{"path":"a","text":"3"}`)),
		asst(say("done")),
	}
	r := newRunner(t, scriptModel(turns...), log)
	r.Policy = byTool(nil)
	var steps []loop.Step
	r.Hooks.OnStep = func(_ context.Context, st loop.Step) error { steps = append(steps, st); return nil }
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	st := out.Suspended
	d := loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove, Remember: loop.RememberRun}}}

	// Without the decider's name the remember cannot be recorded.
	_, err = r.Resume(context.Background(), st, d)
	require.ErrorIs(t, err, loop.ErrInvalidDecision)
	require.Empty(t, log.list())

	d.Decider = "ann@example.com"
	out, err = r.Resume(context.Background(), st, d)
	require.NoError(t, err)
	// w2 ran without asking; delete_doc is another tool and still waits.
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st = out.Suspended
	assert.Equal(t, map[string]string{"write_doc": "ann@example.com"}, st.Options.Remembered)
	assert.False(t, st.PendingCalls[0].NeedsApproval)
	assert.Equal(t, "ann@example.com", st.PendingCalls[0].ApprovedBy)
	assert.True(t, st.PendingCalls[1].NeedsApproval)
	out, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove, Decider: "bob@example.com"})
	require.NoError(t, err)
	require.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`write_doc({"path":"a","text":"1"})`, `write_doc({"path":"a","text":"2"})`, `delete_doc({"path":"z"})`, `write_doc({"path":"a","text":"3"})`}, log.list())
	var remembered []string
	for _, s := range steps {
		if s.Kind == loop.StepToolExecuted && s.ApprovedByRule != "" {
			remembered = append(remembered, s.CallID+": "+s.ApprovedByRule)
		}
	}
	assert.Equal(t, []string{"w2: remembered, by ann@example.com", "w3: remembered, by ann@example.com"}, remembered)
}

func TestRememberRefusals(t *testing.T) {
	log := &execLog{}
	for _, tt := range []struct {
		name string
		rule *loop.ApprovalRule
		cd   loop.CallDecision
		want string
	}{
		{"always ask", &loop.ApprovalRule{AlwaysAsk: true}, loop.CallDecision{CallID: "w1", Action: loop.ActionApprove, Remember: "run"}, "always ask"},
		{"quorum", &loop.ApprovalRule{RequiredApprovals: 2}, loop.CallDecision{CallID: "w1", Action: loop.ActionApprove, Remember: "run"}, "needs 2 approvals"},
		{"with a denial", nil, loop.CallDecision{CallID: "w1", Action: loop.ActionDeny, Remember: "run"}, "approve or edit"},
		{"unknown scope", nil, loop.CallDecision{CallID: "w1", Action: loop.ActionApprove, Remember: "forever"}, `remember must be "run"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"1"}`)), asst(say("done"))), log)
			r.Policy = byTool(map[string]loop.Verdict{"write_doc": {Action: loop.VerdictRequireApproval, Rule: "r", Approval: tt.rule}})
			out, err := r.Run(context.Background(), request("go"))
			require.NoError(t, err)
			st := out.Suspended
			err = loop.ValidateDecision(t.Context(), r.Tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{tt.cd}})
			require.ErrorIs(t, err, loop.ErrInvalidDecision)
			assert.True(t, strings.Contains(err.Error(), tt.want), "got %v, want %q", err, tt.want)
		})
	}
}

func TestPolicyQuerySeesTheToolsOwnTrigger(t *testing.T) {
	log := &execLog{}
	var seen []string
	r := newRunner(t, scriptModel(asst(use("r1", "read_doc", `{"path":"a"}`), use("g1", "guarded_read", `{"path":"/secret/x"}`), use("w1", "write_doc", `{"path":"a","text":"x"}`)), asst(say("ok"))), log)
	r.Policy = func(_ context.Context, q loop.PolicyQuery) loop.Verdict {
		in, _ := json.Marshal(q.Call.NeedsApproval)
		seen = append(seen, q.Call.Name+"="+string(in)+"/"+string(q.Definition.Effect))
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "all"}
	}
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{"read_doc=false/read", "guarded_read=true/read", "write_doc=true/write"}, seen)
}

// TestUnapprovableDeniesBeforeSuspending: a call the Unapprovable hook
// names is denied like a deny verdict (error result, tool_denied step with
// its rule and the reason) instead of holding the turn; the turn suspends
// only for a call still needing approval, and a call needing no approval
// is never denied by the hook.
func TestUnapprovableDeniesBeforeSuspending(t *testing.T) {
	const why = "approval cannot be given: rule \"two-of-ops\" needs 2 approvals"
	ask := loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "two-of-ops", Approval: &loop.ApprovalRule{RequiredApprovals: 2, Description: "ops changes take two"}}
	hook := func(ids ...string) func(context.Context, []loop.PendingCall) map[string]string {
		return func(_ context.Context, calls []loop.PendingCall) map[string]string {
			out := map[string]string{}
			for _, id := range ids {
				out[id] = why
			}
			return out
		}
	}

	t.Run("the only held call: no suspension, the model hears why", func(t *testing.T) {
		log := &execLog{}
		r := newRunner(t, scriptModel(asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"a","text":"x"}`)), asst(say("done"))), log)
		r.Policy = byTool(map[string]loop.Verdict{"write_doc": ask})
		r.Unapprovable = hook("w1", "r1")
		var steps []loop.Step
		r.Hooks.OnStep = func(_ context.Context, st loop.Step) error { steps = append(steps, st); return nil }
		out, err := r.Run(context.Background(), request("go"))
		require.NoError(t, err)
		require.Equal(t, loop.ReasonCompleted, out.Reason, "got outcome %v, want the run to go on", out.Kind)
		assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list(), "the read sibling runs; the hook cannot deny a call needing no approval")
		res, ok := resultFor(out.Transcript, "w1")
		require.True(t, ok)
		assert.True(t, res.IsError)
		assert.Contains(t, res.Content, `denied by policy rule "two-of-ops": `+why)
		var denied []loop.Step
		for _, st := range steps {
			if st.Kind == loop.StepToolDenied {
				denied = append(denied, st)
			}
		}
		require.Len(t, denied, 1)
		assert.Equal(t, "w1", denied[0].CallID)
		assert.Equal(t, "two-of-ops", denied[0].Rule)
		assert.Contains(t, denied[0].Detail, why)
		checkTranscript(t, out.Transcript)
	})

	t.Run("a sibling still needing approval holds the turn", func(t *testing.T) {
		log := &execLog{}
		r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"x"}`), use("d1", "delete_doc", `{"path":"b"}`)), asst(say("done"))), log)
		r.Policy = byTool(map[string]loop.Verdict{"write_doc": ask})
		r.Unapprovable = hook("w1")
		out, err := r.Run(context.Background(), request("go"))
		require.NoError(t, err)
		require.Equal(t, loop.OutcomeSuspended, out.Kind)
		assert.Empty(t, log.list())
		w1, d1 := out.Suspended.PendingCalls[0], out.Suspended.PendingCalls[1]
		assert.False(t, w1.NeedsApproval)
		assert.Equal(t, why, w1.Denied)
		assert.Nil(t, w1.Approval)
		assert.Equal(t, "ops changes take two", w1.RuleDescription, "what the rule is for stays for the approvers of the turn")
		assert.True(t, d1.NeedsApproval)
		assert.Empty(t, d1.Denied)
	})
}

// byPath is a Policy on write_doc's path: prod/ is denied, pricing is held
// for two of finance, drafts/ runs without approval, the rest is held
// under the default rule.
func byPath(_ context.Context, q loop.PolicyQuery) loop.Verdict {
	var in struct{ Path string }
	_ = json.Unmarshal(q.Call.Input, &in)
	switch {
	case strings.HasPrefix(in.Path, "prod/"):
		return loop.Verdict{Action: loop.VerdictDeny, Rule: "no-prod", Message: "production is never written by an agent"}
	case in.Path == "pricing":
		return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "pricing",
			Approval: &loop.ApprovalRule{Approvers: []string{"group:finance"}, RequiredApprovals: 2, FourEyes: true}}
	case strings.HasPrefix(in.Path, "drafts/"):
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "drafts", Description: "drafts are scratch space"}
	case q.Call.NeedsApproval:
		return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "default"}
	}
	return loop.Verdict{Action: loop.VerdictAllow, Rule: "default"}
}

// TestAnEditIsJudgedByThePolicy: an approver's edit is asked of the policy
// as the call would have been: it stands under the rule the call was held
// for, or when the policy lets it run unasked; an edit into a denied path
// or under a rule with other approval terms is refused when the decision
// is checked (the API does, before recording it).
func TestAnEditIsJudgedByThePolicy(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"notes","text":"x"}`)), asst(say("done"))), log)
	r.Policy = byPath
	out, err := r.Run(t.Context(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	require.Equal(t, "default", st.PendingCalls[0].Rule)
	edit := func(input string) loop.Decision {
		return loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(input)}}}
	}
	for _, tt := range []struct{ input, want string }{
		{`{"path":"prod/site","text":"x"}`, `refused by policy rule "no-prod": production is never written by an agent`},
		{`{"path":"pricing","text":"0 EUR"}`, `falls under policy rule "pricing" (approvers group:finance; 2 approvals; four eyes), not under rule "default"`},
	} {
		err := loop.ValidateDecision(t.Context(), r.Tools, r.Policy, st.PendingCalls, st.TurnDigest, edit(tt.input))
		require.ErrorIs(t, err, loop.ErrInvalidDecision, tt.input)
		assert.Contains(t, err.Error(), tt.want)
	}

	for _, input := range []string{`{"path":"other","text":"y"}`, `{"path":"drafts/a","text":"y"}`} {
		assert.NoError(t, loop.ValidateDecision(t.Context(), r.Tools, r.Policy, st.PendingCalls, st.TurnDigest, edit(input)), input)
	}
	out, err = r.Resume(t.Context(), st, edit(`{"path":"other","text":"y"}`))
	require.NoError(t, err)
	assert.Equal(t, []string{`write_doc({"path":"other","text":"y"})`}, log.list())
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
}

// TestOnlyHeldCallsAreDeniedOrEditedOneByOne: in a held turn, a call
// nobody was asked about (a read, a write a rule allows, a call a rule
// denies, an unknown tool's) cannot be denied or edited by a per-call
// decision, as the approval page refuses it: it runs (or fails) whatever
// the decision, and only a whole-turn denial stops it. Approving it is
// what happens anyway and stays accepted. Before, the API took a deny of
// such a read, which the model was then told a human had refused, and an
// edit of it, which ran input no approver was asked about.
func TestOnlyHeldCallsAreDeniedOrEditedOneByOne(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(
		use("r1", "read_doc", `{"path":"notes"}`),
		use("w1", "write_doc", `{"path":"notes","text":"x"}`),
		use("d1", "write_doc", `{"path":"drafts/a","text":"x"}`),
		use("p1", "write_doc", `{"path":"prod/site","text":"x"}`),
		use("u1", "no_such_tool", `{}`),
	), asst(say("done"))), log)
	r.Policy = byPath
	out, err := r.Run(t.Context(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	for _, c := range st.PendingCalls {
		require.Equal(t, c.ID == "w1", c.NeedsApproval, c.ID)
	}
	assert.Equal(t, "drafts are scratch space", st.PendingCalls[2].RuleDescription, "the allow rule's description is kept for the approvers")
	decide := func(extra loop.CallDecision) loop.Decision {
		return loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove}, extra}}
	}
	for _, tt := range []struct {
		name string
		call loop.CallDecision
		want string // "" accepted
	}{
		{"deny a read", loop.CallDecision{CallID: "r1", Action: loop.ActionDeny, Message: "no"},
			`calls[1]: call "r1" (read_doc) needs no approval (its tool only reads): it runs without one, so it cannot be denied`},
		{"edit a read", loop.CallDecision{CallID: "r1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"pricing"}`)},
			`call "r1" (read_doc) needs no approval (its tool only reads): it runs without one, so it cannot be edited`},
		{"deny a write a rule allows", loop.CallDecision{CallID: "d1", Action: loop.ActionDeny},
			`call "d1" (write_doc) needs no approval (policy rule "drafts" allows it): it runs without one, so it cannot be denied`},
		{"edit a write a rule allows", loop.CallDecision{CallID: "d1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"drafts/b","text":"y"}`)},
			`call "d1" (write_doc) needs no approval (policy rule "drafts" allows it): it runs without one, so it cannot be edited`},
		{"deny an unknown tool's call", loop.CallDecision{CallID: "u1", Action: loop.ActionDeny},
			`call "u1" (no_such_tool) needs no approval and cannot run (`},
		{"deny a call a rule denies", loop.CallDecision{CallID: "p1", Action: loop.ActionDeny},
			`call "p1" (write_doc) was denied by policy rule "no-prod": it never runs, so it cannot be decided`},
		{"approve a call a rule denies", loop.CallDecision{CallID: "p1", Action: loop.ActionApprove},
			`call "p1" (write_doc) was denied by policy rule "no-prod"`},
		{"approve a read", loop.CallDecision{CallID: "r1", Action: loop.ActionApprove}, ""},
		{"approve a write a rule allows", loop.CallDecision{CallID: "d1", Action: loop.ActionApprove}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := loop.ValidateDecision(t.Context(), r.Tools, r.Policy, st.PendingCalls, st.TurnDigest, decide(tt.call))
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, loop.ErrInvalidDecision)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	// A decision recorded before the rule (by an earlier release) still
	// resumes as it was accepted: refusing it now would end the run.
	out, err = r.Resume(t.Context(), st, decide(loop.CallDecision{CallID: "r1", Action: loop.ActionDeny, Message: "not that"}))
	require.NoError(t, err)
	assert.Equal(t, []string{`write_doc({"path":"notes","text":"x"})`, `write_doc({"path":"drafts/a","text":"x"})`}, log.list())
	res, _ := resultFor(out.Transcript, "r1")
	assert.True(t, res.IsError, "the read was denied as decided")
	checkTranscript(t, out.Transcript)
}

// TestAnAcceptedEditIsNotRefusedAtResume: an edit judged when its
// decision was made stands at resume when the policy has changed since:
// the decision was accepted under the policy in force then, and a rule
// that would now hold the edited call under other terms does not make it
// invalid (the run does not fail): it runs. Only a deny rule in force at
// the resume stops it (TestADenyRuleDeployedSinceTheHoldStopsAnApprovedCall),
// and then the run goes on without it.
func TestAnAcceptedEditIsNotRefusedAtResume(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"notes","text":"x"}`)), asst(say("done"))), log)
	r.Policy = byPath
	out, err := r.Run(t.Context(), request("go"))
	require.NoError(t, err)
	st := out.Suspended
	d := loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"other","text":"y"}`)}}}
	require.NoError(t, loop.ValidateDecision(t.Context(), r.Tools, r.Policy, st.PendingCalls, st.TurnDigest, d))
	r.Policy = func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "lockdown", Approval: &loop.ApprovalRule{RequiredApprovals: 3}}
	}
	out, err = r.Resume(t.Context(), st, d)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`write_doc({"path":"other","text":"y"})`}, log.list())

	log = &execLog{}
	r = newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"notes","text":"x"}`)), asst(say("done"))), log)
	r.Policy = func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictDeny, Rule: "lockdown"}
	}
	out, err = r.Resume(t.Context(), st, d)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason, "a deny rule since: the run goes on")
	assert.Empty(t, log.list(), "a deny rule since: the edit does not run")
}

// TestAReusedCallIDGetsItsOwnKey: a model that reuses a tool_use id in a
// later turn (ids are the model's own) gets a distinct idempotency key for
// the later call, so a server that deduplicates on the key does not drop
// a different write as a repeat; a unique id keeps the plain key.
func TestAReusedCallIDGetsItsOwnKey(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(
		asst(use("c1", "write_doc", `{"path":"a","text":"first"}`)),
		asst(use("c1", "write_doc", `{"path":"a","text":"second"}`)),
		asst(use("c2", "write_doc", `{"path":"b","text":"x"}`)),
		asst(say("done"))), log)
	r.Policy = byTool(map[string]loop.Verdict{"write_doc": {Action: loop.VerdictAllow, Rule: "drafts"}})
	out, err := r.Run(t.Context(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.ReasonCompleted, out.Reason)
	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Equal(t, []string{"run-1/-/c1", "run-1/-/c1#1", "run-1/-/c2"}, log.keys)
}
