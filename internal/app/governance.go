package app

import (
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/policy"
)

// Governance is who is who and what needs whose approval: the
// deployment's directory (persons, groups, service accounts) and its
// policy (rules per tool), read and compiled once at start-up.
type Governance struct {
	// Directory is nil without a directory file: every principal is only
	// itself, compared canonically, and runs cannot name groups.
	Directory *identity.Directory
	// Policy is nil without a policy file: no rules, so writes (and tools
	// marked as needing approval) need approval and the rest run.
	Policy *policy.Policy
}

// LoadGovernance reads the directory file and the policy file (either
// path may be empty). Any error stops start-up: it names the file and the
// entry or rule at fault (a CEL condition that does not compile, an
// approver group the directory lacks, ...).
func LoadGovernance(directoryPath, policyPath string) (Governance, error) {
	var g Governance
	if directoryPath != "" {
		d, err := identity.LoadDirectory(directoryPath)
		if err != nil {
			return Governance{}, err
		}
		g.Directory = d
	}
	if policyPath != "" {
		p, err := policy.Load(policyPath, policy.Options{Directory: g.Directory})
		if err != nil {
			return Governance{}, err
		}
		g.Policy = p
	}
	return g, nil
}
