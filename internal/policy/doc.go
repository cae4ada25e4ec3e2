// Package policy decides, per tool call, whether it may run unattended,
// needs a human's approval (and whose, how many, four-eyes) or is refused,
// from a deployment policy file of rules with optional CEL conditions.
//
// A rule names tools (builtin names, MCP <server>__<tool> names, or globs
// with *), an optional condition in CEL (github.com/google/cel-go) over
// tool, effect, args and run (initiator, initiator_person,
// initiator_groups, metadata), and an outcome: allow, require_approval
// (approvers, required_approvals, four_eyes, always_ask) or deny (with a
// message for the model). The first rule whose tools and condition match
// decides; with no match a call that needs approval by its tool's own
// declaration (write effect, approval marker, argument policy) requires
// approval, and anything else is allowed. Every outcome names the rule that
// produced it ("default" when none matched) so it can be recorded on the
// pending call and shown to approvers.
//
// The worker asks when the model makes a turn, and asks again, when a
// decided turn resumes, about each call the decision lets run: only a deny
// then counts (the call does not run; see loop.Runner.Resume), so a freeze
// deployed while calls wait for approval stops those approved after it,
// and nothing else a policy deployed since says changes what was decided.
//
// run.metadata is what the initiator wrote when starting the run: an allow
// rule keyed on it lets the initiator authorise their own calls, so rules
// that decide who may do what read the initiator's person and groups (from
// the directory) or the call's arguments.
//
// Conditions are compiled and type-checked once (Compile; a broken rule is
// an error naming it, and the caller refuses to start) and run under a cost
// limit. A condition that cannot be evaluated never loosens anything: it
// counts as matching, an allow rule then counts as require_approval, and a
// later rule that would deny still denies (see Evaluate).
//
// A run may tighten the policy (RunRequirements: more calls needing
// approval, more approvals, four-eyes) but never loosen it; CheckRun refuses
// a run that tries, with an error wrapping ErrLoosens.
package policy
