package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/toolpattern"
)

// Action is what a rule does with a call.
type Action string

// The actions, from loosest to strictest.
const (
	Allow           Action = "allow"
	RequireApproval Action = "require_approval"
	Deny            Action = "deny"
)

// Reserved rule ids: the outcome when no rule matched, and (later) the
// outcome of a call auto-approved by an approver's remember: "run".
const (
	RuleDefault    = "default"
	RuleRemembered = "remembered"
)

// Limits of a policy.
const (
	MaxRules             = 500
	MaxConditionBytes    = 4096
	MaxMessageBytes      = 1000
	MaxRequiredApprovals = identity.MaxApproverEntries
	// DefaultCostLimit bounds one condition's evaluation (CEL cost units;
	// a comparison costs about 1, a string operation about its length / 10).
	DefaultCostLimit uint64 = 100_000
)

// RunFacts is what a condition knows about the run, as the CEL variable
// run: run.initiator (the initiator's canonical key: e-mail lowercased
// without +tag, an assumed-role session as its role ARN), run.initiator_person
// (the directory person id, "" without an entry), run.initiator_groups
// (the person's directory groups) and run.metadata (the run's labels).
type RunFacts struct {
	Initiator       string            `cel:"initiator"`
	InitiatorPerson string            `cel:"initiator_person"`
	InitiatorGroups []string          `cel:"initiator_groups"`
	Metadata        map[string]string `cel:"metadata"`
}

// FactsFor returns the RunFacts of an initiator, looked up in the directory.
func FactsFor(dir *identity.Directory, initiator identity.Principal, metadata map[string]string) RunFacts {
	s := dir.Lookup(initiator)
	f := RunFacts{Initiator: initiator.Key(), InitiatorGroups: []string{}, Metadata: metadata}
	if f.Metadata == nil {
		f.Metadata = map[string]string{}
	}
	if s.Person != nil {
		f.InitiatorPerson = s.Person.ID
		for _, g := range s.Person.Groups {
			f.InitiatorGroups = append(f.InitiatorGroups, g.Name)
		}
	}
	return f
}

// Call is what the policy is asked about one tool call.
type Call struct {
	// Tool is the tool's name (builtin, or <server>__<tool> for MCP).
	Tool string
	// Effect is the tool's declared effect, "read" or "write" (the CEL variable effect).
	Effect string
	// NeedsApproval is the tool's own trigger: a write effect, the approval
	// marker, or its argument policy. It decides when no rule matches.
	NeedsApproval bool
	// Args is the call's JSON input (the CEL variable args, a map).
	Args json.RawMessage
	// Run describes the run.
	Run RunFacts
}

// Outcome is the policy's answer for one call.
type Outcome struct {
	Action Action `json:"action"`
	// Rule is the id of the rule that decided, RuleDefault when none matched.
	Rule string `json:"rule"`
	// Approvers are the rule's approver entries; nil means the run's.
	Approvers []string `json:"approvers,omitempty"`
	// RequiredApprovals is how many distinct persons must approve (at least
	// 1 for require_approval, 0 otherwise).
	RequiredApprovals int  `json:"required_approvals,omitempty"`
	FourEyes          bool `json:"four_eyes,omitempty"`
	AlwaysAsk         bool `json:"always_ask,omitempty"`
	// Message is the denial told to the model (deny).
	Message string `json:"message,omitempty"`
	// Description is the deciding rule's description, shown to approvers
	// whatever the outcome: why a call is held, why it runs without them
	// (allow), why it was refused (deny). For an allow rule the run made
	// require approval (TightenedByRun) it says so first.
	Description string `json:"description,omitempty"`
	// EvalError is set when a rule's condition could not be evaluated; the
	// outcome is then the fail-closed reading (see Evaluate).
	EvalError string `json:"eval_error,omitempty"`
	// TightenedByRun says the run's own requirements made the outcome stricter.
	TightenedByRun bool `json:"tightened_by_run,omitempty"`
}

// Options configure Compile.
type Options struct {
	// Directory resolves rule approvers (groups must exist). Nil: no groups.
	Directory *identity.Directory
	// CostLimit bounds one condition's evaluation (0: DefaultCostLimit).
	CostLimit uint64
}

// Policy is a compiled policy file; safe for concurrent use.
type Policy struct {
	rules    []rule
	defaults Defaults
}

type rule struct {
	RuleEntry
	patterns []toolpattern.Pattern
	program  condition // nil: no condition
}

// condition is a compiled `when` condition (cel.go).
type condition interface {
	// eval evaluates the condition over the call's variables.
	eval(ctx context.Context, v *vars) (bool, error)
}

// conditionCompiler compiles `when` conditions: CEL (cel.go), or, in a
// Lambda build without the tag cel, nothing (noConditions).
type conditionCompiler interface {
	compile(src string) (condition, error)
}

// newConditions is this build's condition compiler with a cost limit per
// evaluation (a variable for the tests of noConditions).
var newConditions = buildConditions

// Compile validates a policy file and compiles its conditions. The error
// lists every broken rule, each named (rules[2] "payments": when: ...).
func Compile(f File, opts Options) (*Policy, error) {
	limit := opts.CostLimit
	if limit == 0 {
		limit = DefaultCostLimit
	}
	conds, err := newConditions(limit)
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if f.Version != FileVersion {
		fail("version: got %d, want %d", f.Version, FileVersion)
	}
	if n := f.Defaults.RequiredApprovals; n < 0 || n > MaxRequiredApprovals {
		fail("defaults: required_approvals must be between 0 and %d", MaxRequiredApprovals)
	}
	if len(f.Rules) > MaxRules {
		fail("rules: %d rules, at most %d", len(f.Rules), MaxRules)
	}
	p := &Policy{defaults: f.Defaults}
	seen := map[string]int{}
	for i, e := range f.Rules {
		where := fmt.Sprintf("rules[%d] %q", i, e.ID)
		bad := func(format string, args ...any) { fail("%s: "+format, append([]any{where}, args...)...) }
		if err := checkRuleID(e.ID); err != nil {
			bad("id: %v", err)
		} else if j, dup := seen[e.ID]; dup {
			bad("id is also the id of rules[%d]", j)
		} else {
			seen[e.ID] = i
		}
		r := rule{RuleEntry: e}
		if len(e.Tools) == 0 {
			bad("tools: at least one tool pattern is required (\"*\" for every tool)")
		}
		ps, err := toolpattern.ParseList(e.Tools)
		if err != nil {
			bad("tools%v", err)
		}
		r.patterns = ps
		if len(e.Description) > MaxMessageBytes || len(e.Message) > MaxMessageBytes {
			bad("description and message are at most %d bytes", MaxMessageBytes)
		}
		switch e.Outcome {
		case Allow, Deny:
			if len(e.Approvers) > 0 || e.RequiredApprovals != 0 || e.FourEyes || e.AlwaysAsk {
				bad("approvers, required_approvals, four_eyes and always_ask belong to outcome %q only", RequireApproval)
			}
			if e.Outcome == Allow && e.Message != "" {
				bad("message: an allow rule tells nobody anything (use description)")
			}
		case RequireApproval:
			if e.Message != "" {
				bad("message is the denial told to the model; a require_approval rule uses description")
			}
			if e.RequiredApprovals < 0 || e.RequiredApprovals > MaxRequiredApprovals {
				bad("required_approvals must be between 0 and %d", MaxRequiredApprovals)
			}
			if len(e.Approvers) > 0 {
				list, err := opts.Directory.ResolveApprovers("approvers", e.Approvers)
				if err != nil {
					bad("%v", err)
				} else if n, have := max(e.RequiredApprovals, f.Defaults.RequiredApprovals), len(opts.Directory.Eligible(identity.Principal{}, identity.Requirement{Approvers: list})); n > have {
					bad("needs %d approvals but its approvers are %d persons", n, have)
				}
			}
		case "":
			bad("outcome is required: %q, %q or %q", Allow, RequireApproval, Deny)
		default:
			bad("outcome %q: want %q, %q or %q", e.Outcome, Allow, RequireApproval, Deny)
		}
		if e.When != "" {
			prg, err := conds.compile(e.When)
			if err != nil {
				bad("when: %v", err)
			}
			r.program = prg
		}
		p.rules = append(p.rules, r)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("policy: %w", errors.Join(errs...))
	}
	return p, nil
}

func checkRuleID(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("must be 1 to 64 characters")
	}
	if s == RuleDefault || s == RuleRemembered {
		return fmt.Errorf("%q is reserved", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')) {
			return fmt.Errorf("%q: use letters, digits, '.', '_', '-' (starting with a letter or digit)", s)
		}
	}
	return nil
}

// Defaults returns the deployment's minimum for calls needing approval.
func (p *Policy) Defaults() Defaults {
	if p == nil {
		return Defaults{}
	}
	return p.defaults
}

// Evaluate returns the outcome for one call; run holds the run's own
// tightening (nil: none). A nil *Policy has no rules.
//
// The first rule whose tools match and whose condition is true decides. A
// condition that cannot be evaluated (an error, a non-bool value, the cost
// limit, a cancelled ctx) counts both ways and the stricter reading wins:
// the rule as if it matched (an allow rule reading as require_approval),
// or the rules after it as if it did not. So an evaluation error can turn
// an allow into require_approval or deny, never the other way.
func (p *Policy) Evaluate(ctx context.Context, call Call, run *RunRules) Outcome {
	var rules []rule
	if p != nil {
		rules = p.rules
	}
	o := p.evaluate(ctx, rules, call, newVars(call))
	return run.tighten(o, call.Tool, p.Defaults())
}

type vars struct {
	m      map[string]any
	decErr error
}

func newVars(call Call) *vars {
	args := map[string]any{}
	var err error
	if len(call.Args) > 0 && string(call.Args) != "null" {
		if err = json.Unmarshal(call.Args, &args); err != nil {
			err = fmt.Errorf("args are not a JSON object: %w", err)
		}
	}
	run := call.Run
	if run.InitiatorGroups == nil {
		run.InitiatorGroups = []string{}
	}
	if run.Metadata == nil {
		run.Metadata = map[string]string{}
	}
	return &vars{m: map[string]any{"tool": call.Tool, "effect": call.Effect, "args": args, "run": run}, decErr: err}
}

func (p *Policy) evaluate(ctx context.Context, rules []rule, call Call, v *vars) Outcome {
	for i, r := range rules {
		if !toolpattern.AnyMatch(r.patterns, call.Tool) {
			continue
		}
		if r.program == nil {
			return p.outcome(r)
		}
		matched, err := evalCondition(ctx, r.program, v)
		if err == nil {
			if matched {
				return p.outcome(r)
			}
			continue
		}
		// Fail closed: the stricter of "it matched" and "it did not".
		evalErr := fmt.Sprintf("rule %q: %v", r.ID, err)
		asMatched := p.outcome(r)
		if asMatched.Action == Deny {
			asMatched.EvalError = evalErr
			return asMatched
		}
		rest := p.evaluate(ctx, rules[i+1:], call, v)
		o := stricter(asMatched, rest, p.requireApproval(r.ID, nil, 0, false, false, r.Description))
		if rest.EvalError != "" {
			evalErr += "; " + rest.EvalError // a later rule failed too
		}
		o.EvalError = evalErr
		return o
	}
	if call.NeedsApproval {
		return p.requireApproval(RuleDefault, nil, 0, false, false, "")
	}
	return Outcome{Action: Allow, Rule: RuleDefault}
}

// stricter is the outcome of a rule whose condition could not be
// evaluated: matched (its own outcome, allow or require_approval) or not
// (rest, what the rules after it give). A deny in rest wins. An allow rule
// reads as require_approval, on rest's terms when rest requires approval
// (they are at least the deployment's defaults, and may name approvers, a
// quorum or four-eyes a later rule asks for), else on the defaults
// (asked). Two require_approval readings must let the same approvers
// decide (a rule's approvers, or the run's when it names none), or the
// call is denied: neither set may stand in for the other. Then the higher
// quorum, and four-eyes and always_ask when either asks for them: an error
// never loosens what either reading would demand.
func stricter(matched, rest, asked Outcome) Outcome {
	switch {
	case rest.Action == Deny:
		return rest
	case matched.Action == Allow && rest.Action == RequireApproval:
		return rest
	case matched.Action == Allow:
		return asked
	case rest.Action != RequireApproval:
		return matched
	}
	o := matched
	if !slices.Equal(slices.Sorted(slices.Values(o.Approvers)), slices.Sorted(slices.Values(rest.Approvers))) {
		// Who may approve differs (no approvers: the run's own): either
		// reading would let in someone the other keeps out.
		return Outcome{Action: Deny, Rule: matched.Rule, Message: fmt.Sprintf(
			"policy rule %q could not be evaluated, and it and rule %q let different approvers decide: refused rather than approved by either", matched.Rule, rest.Rule)}
	}
	o.RequiredApprovals = max(o.RequiredApprovals, rest.RequiredApprovals)
	o.FourEyes = o.FourEyes || rest.FourEyes
	o.AlwaysAsk = o.AlwaysAsk || rest.AlwaysAsk
	return o
}

func evalCondition(ctx context.Context, c condition, v *vars) (bool, error) {
	if v.decErr != nil {
		return false, v.decErr
	}
	return c.eval(ctx, v)
}

func (p *Policy) outcome(r rule) Outcome {
	switch r.Outcome {
	case Allow:
		return Outcome{Action: Allow, Rule: r.ID, Description: r.Description}
	case RequireApproval:
		return p.requireApproval(r.ID, r.Approvers, r.RequiredApprovals, r.FourEyes, r.AlwaysAsk, r.Description)
	}
	msg := r.Message
	if msg == "" {
		msg = fmt.Sprintf("denied by policy rule %q", r.ID)
	}
	return Outcome{Action: Deny, Rule: r.ID, Message: msg, Description: r.Description}
}

func (p *Policy) requireApproval(id string, approvers []string, n int, fourEyes, alwaysAsk bool, desc string) Outcome {
	d := p.Defaults()
	return Outcome{
		Action: RequireApproval, Rule: id, Approvers: approvers,
		RequiredApprovals: max(n, d.RequiredApprovals, 1),
		FourEyes:          fourEyes || d.FourEyes, AlwaysAsk: alwaysAsk, Description: desc,
	}
}

// UnusedRules returns the ids of rules none of whose tool patterns matches
// any of the given tool names: worth a warning at start-up (a typo, or a
// tool source that is gone), not an error (MCP tools come and go).
func (p *Policy) UnusedRules(tools []string) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, r := range p.rules {
		used := false
		for _, t := range tools {
			if toolpattern.AnyMatch(r.patterns, t) {
				used = true
				break
			}
		}
		if !used {
			out = append(out, r.ID)
		}
	}
	return out
}
