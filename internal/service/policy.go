package service

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/runs"
)

// runPolicy returns the loop Policy of one run: the deployment policy
// (pol; nil: no rules, the tools' own triggers decide) evaluated with the
// run's facts (initiator, its directory person and groups, metadata) and
// the run's own tightening. A run whose requirements no longer pass the
// policy (it changed since the run started) gets the policy's, which are
// the stricter.
func runPolicy(pol *policy.Policy, dir *identity.Directory, r *runs.Run, req *StartRequest, log *slog.Logger) loop.Policy {
	init, _ := identity.Parse(r.Initiator) // a zero principal matches no person or group
	facts := policy.FactsFor(dir, init, r.Metadata)
	rules, err := pol.CheckRun(req.RunRequirements())
	if err != nil {
		log.Warn("the run's requirements no longer pass the policy; the policy's apply", "err", err)
		rules, err = pol.CheckRun(policy.RunRequirements{RequireApproval: req.RequireApproval})
		if err != nil {
			rules, _ = pol.CheckRun(policy.RunRequirements{})
		}
	}
	return func(ctx context.Context, q loop.PolicyQuery) loop.Verdict {
		o := pol.Evaluate(ctx, policy.Call{
			Tool: q.Call.Name, Effect: string(q.Definition.Effect), NeedsApproval: q.Call.NeedsApproval,
			Args: q.Call.Input, Run: facts,
		}, rules)
		if o.EvalError != "" {
			// The condition's error may quote arguments: the rule id only at info level.
			log.WarnContext(ctx, "policy condition could not be evaluated; the stricter reading applies", "rule", o.Rule, "tool", q.Call.Name)
			log.DebugContext(ctx, "policy condition error", "err", o.EvalError)
		}
		switch o.Action {
		case policy.Allow:
			return loop.Verdict{Action: loop.VerdictAllow, Rule: o.Rule, Description: o.Description}
		case policy.Deny:
			return loop.Verdict{Action: loop.VerdictDeny, Rule: o.Rule, Message: o.Message, Description: o.Description}
		}
		approval := &loop.ApprovalRule{
			Approvers: o.Approvers, RequiredApprovals: o.RequiredApprovals, FourEyes: o.FourEyes,
			AlwaysAsk: o.AlwaysAsk, Description: o.Description,
		}
		if q.RememberedBy != "" && remembered(dir, r, q, o, approval) {
			return loop.Verdict{Action: loop.VerdictAllow, Rule: policy.RuleRemembered, ApprovedBy: q.RememberedBy}
		}
		return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: o.Rule, Approval: approval}
	}
}

// DecisionPolicy is the loop Policy of run r as its worker plans with it
// (the deployment policy with the run's facts and its own tightening), for
// judging a decision's edits before the decision is recorded. A start
// request that cannot be read holds every edit back (refused), as its
// worker would fail the run.
func DecisionPolicy(pol *policy.Policy, dir *identity.Directory, r *runs.Run, log *slog.Logger) loop.Policy {
	var req StartRequest
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return func(context.Context, loop.PolicyQuery) loop.Verdict {
			return loop.Verdict{Action: loop.VerdictDeny, Rule: policy.RuleDefault, Message: "the run's start request cannot be read"}
		}
	}
	if log == nil {
		log = slog.Default()
	}
	return runPolicy(pol, dir, r, &req, log)
}

// unapprovable returns the loop's Unapprovable of run r: a held call
// whose approval no decision could give (fewer persons may decide it than
// the approvals it needs, once four-eyes leaves out the initiator and the
// tool gate the persons who may not approve its tool) is denied at once
// with a message naming its rule, the approvals it needs and who may
// decide, instead of suspending the run for a vote that cannot complete
// until its approval deadline. It takes the path of a policy deny rule,
// not a failed run: the model gets an error result it can react to (ask
// for less, or stop), the tool_denied event records the rule and the
// reason, no approver is asked, mailed or listed in an inbox, and the call
// never runs. Like a deny rule's, the denial is nobody's decision, so
// denial_ends_run (about a human's denial) does not end the run.
func unapprovable(dir *identity.Directory, r *runs.Run) func(context.Context, []loop.PendingCall) map[string]string {
	return func(_ context.Context, calls []loop.PendingCall) map[string]string {
		held := make([]runs.CallSummary, 0, len(calls))
		for _, c := range calls {
			held = append(held, runs.CallSummary{ID: c.ID, Tool: c.Name, NeedsApproval: c.NeedsApproval, Effect: c.Effect, Rule: c.Rule, Approval: c.Approval})
		}
		return runs.UnmeetableApprovals(dir, r, held)
	}
}

// remembered reports whether an approver's remember: "run" covers a call
// the policy holds for approval: the rule allows remembering (no
// always_ask, one approval) and the person who remembered may decide this
// very call (approvers, tool gate, four-eyes), checked as a decision would be.
func remembered(dir *identity.Directory, r *runs.Run, q loop.PolicyQuery, o policy.Outcome, approval *loop.ApprovalRule) bool {
	if o.AlwaysAsk || o.RequiredApprovals > 1 {
		return false
	}
	probe := r.Clone()
	probe.PendingCalls = []runs.CallSummary{{ID: q.Call.ID, Tool: q.Call.Name, NeedsApproval: true, Rule: o.Rule, Approval: approval}}
	return runs.MayDecide(dir, probe, q.RememberedBy) == nil
}
