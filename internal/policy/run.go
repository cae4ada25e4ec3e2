package policy

import (
	"errors"
	"fmt"

	"github.com/agentgate/agentgate/internal/toolpattern"
)

// ErrLoosens is wrapped by CheckRun's error when a run asks for less than
// the deployment policy requires (the API answers 422).
var ErrLoosens = errors.New("a run may only tighten the deployment policy, never loosen it")

// ErrInvalidRun marks every error of CheckRun: the rest of the message names
// the field and is written for the API caller (422); the handler maps the
// mark to the API's error, anything unmarked stays internal.
var ErrInvalidRun = errors.New("invalid run requirements")

// RunRequirements are what a run asks for on top of the deployment policy.
type RunRequirements struct {
	// RequireApproval lists tool patterns whose calls need approval in this
	// run even where the policy allows them.
	RequireApproval []string `json:"require_approval,omitempty"`
	// RequiredApprovals raises the number of distinct approvers for every
	// call that needs approval (0: the policy's).
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// FourEyes: nil leaves the policy's; true adds four-eyes to every call
	// needing approval; false is refused when the policy requires four-eyes.
	FourEyes *bool `json:"four_eyes,omitempty"`
}

// RunRules are a run's checked requirements, ready for Evaluate.
type RunRules struct {
	patterns          []toolpattern.Pattern
	requiredApprovals int
	fourEyes          bool
}

// CheckRun validates a run's requirements against the policy. An attempt
// to loosen it wraps ErrLoosens; other problems are plain validation
// errors; both are the caller's to fix (422) and name the field.
func (p *Policy) CheckRun(r RunRequirements) (*RunRules, error) {
	rules, err := p.checkRun(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
	}
	return rules, nil
}

func (p *Policy) checkRun(r RunRequirements) (*RunRules, error) {
	d := p.Defaults()
	switch {
	case r.FourEyes != nil && !*r.FourEyes && d.FourEyes:
		return nil, fmt.Errorf("four_eyes: false: the deployment policy requires four-eyes: %w", ErrLoosens)
	case r.RequiredApprovals < 0 || r.RequiredApprovals > MaxRequiredApprovals:
		return nil, fmt.Errorf("required_approvals must be between 1 and %d", MaxRequiredApprovals)
	case r.RequiredApprovals > 0 && r.RequiredApprovals < d.RequiredApprovals:
		return nil, fmt.Errorf("required_approvals: %d: the deployment policy requires at least %d: %w", r.RequiredApprovals, d.RequiredApprovals, ErrLoosens)
	}
	ps, err := toolpattern.ParseList(r.RequireApproval)
	if err != nil {
		return nil, fmt.Errorf("require_approval%w", err)
	}
	return &RunRules{patterns: ps, requiredApprovals: r.RequiredApprovals, fourEyes: r.FourEyes != nil && *r.FourEyes}, nil
}

// tighten applies the run's requirements to an outcome: never looser.
func (rr *RunRules) tighten(o Outcome, tool string, d Defaults) Outcome {
	if rr == nil {
		return o
	}
	switch o.Action {
	case Allow:
		if !toolpattern.AnyMatch(rr.patterns, tool) {
			return o
		}
		o = Outcome{Action: RequireApproval, Rule: o.Rule, RequiredApprovals: max(d.RequiredApprovals, 1), FourEyes: d.FourEyes, EvalError: o.EvalError, TightenedByRun: true,
			Description: tightenedNote(tool, o.Description)}
		fallthrough
	case RequireApproval:
		if rr.requiredApprovals > o.RequiredApprovals {
			o.RequiredApprovals, o.TightenedByRun = rr.requiredApprovals, true
		}
		if rr.fourEyes && !o.FourEyes {
			o.FourEyes, o.TightenedByRun = true, true
		}
	}
	return o
}

// tightenedNote is the description approvers see on a call the policy
// lets run (its rule's description: desc, "" for none) that a run asked
// approval for: why it is held, then what the rule says.
func tightenedNote(tool, desc string) string {
	note := fmt.Sprintf("this run asks for approval of %s calls, which the policy alone lets run", tool)
	if desc != "" {
		note += " (" + desc + ")"
	}
	return note
}
