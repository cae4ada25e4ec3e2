package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// FileVersion is the only policy file version this package reads.
const FileVersion = 1

// MaxFileBytes bounds a policy file.
const MaxFileBytes = 1 << 20

// File is the JSON schema of the deployment policy file. See the README
// ("Policy") for a commented example.
type File struct {
	// Version must be 1.
	Version int `json:"version"`
	// Defaults are the deployment's minimum for every call that needs approval.
	Defaults Defaults `json:"defaults,omitzero"`
	// Rules are tried in order; the first match decides.
	Rules RuleEntries `json:"rules"`
}

// RuleEntries are the rules of a policy file. They decode strictly (an
// unknown field is an error) and an error names the rule it is in, by
// index and id, as Compile's do: rules[1] "prod-guard": json: unknown
// field "extra".
type RuleEntries []RuleEntry

// UnmarshalJSON decodes the rules one by one, so that an error names its
// rule.
func (rs *RuleEntries) UnmarshalJSON(data []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return err
	}
	if raws == nil {
		*rs = nil
		return nil
	}
	out := make(RuleEntries, len(raws))
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			return fmt.Errorf("%s: %w", ruleName(i, raw), err)
		}
	}
	*rs = out
	return nil
}

// ruleName names rule i of a file by its index and, when it has one that
// decodes, its id.
func ruleName(i int, raw json.RawMessage) string {
	var named struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &named) != nil || named.ID == "" {
		return fmt.Sprintf("rules[%d]", i)
	}
	return fmt.Sprintf("rules[%d] %q", i, named.ID)
}

// Defaults apply to every require_approval outcome (rules and the default).
type Defaults struct {
	// RequiredApprovals is the least number of distinct persons who must
	// approve (0 or 1: one).
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// FourEyes makes four-eyes apply to every call needing approval: the
	// initiator's person never decides.
	FourEyes bool `json:"four_eyes,omitempty"`
}

// RuleEntry is one rule of the policy file.
type RuleEntry struct {
	// ID names the rule in errors, on pending calls and in the audit.
	ID string `json:"id"`
	// Description says what the rule is for (shown to approvers).
	Description string `json:"description,omitempty"`
	// Tools are the tool patterns the rule applies to.
	Tools []string `json:"tools"`
	// When is an optional CEL condition (bool) over tool, effect, args and run.
	When string `json:"when,omitempty"`
	// Outcome is "allow", "require_approval" or "deny".
	Outcome Action `json:"outcome"`
	// Message is told to the model when the rule denies a call.
	Message string `json:"message,omitempty"`
	// Approvers (require_approval) replace the run's approvers for matching
	// calls: principals or "group:<name>".
	Approvers []string `json:"approvers,omitempty"`
	// RequiredApprovals (require_approval) is how many distinct persons must approve.
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// FourEyes (require_approval): the initiator's person never decides.
	FourEyes bool `json:"four_eyes,omitempty"`
	// AlwaysAsk (require_approval): an approver cannot approve the tool for
	// the rest of the run (remember: "run").
	AlwaysAsk bool `json:"always_ask,omitempty"`
}

// LoadFile reads a policy file strictly (unknown fields and trailing data
// are errors). It does not compile it; see Load.
func LoadFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("policy %s: %w", path, err)
	}
	pf, err := DecodeFile(data)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return pf, nil
}

// DecodeFile decodes a policy file strictly.
func DecodeFile(data []byte) (File, error) {
	if len(data) > MaxFileBytes {
		return File{}, fmt.Errorf("policy: larger than %d bytes", MaxFileBytes)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("policy: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return File{}, fmt.Errorf("policy: trailing data after the JSON document")
	}
	return f, nil
}

// Load reads and compiles a policy file: the one call a process makes at
// start-up. Any error should stop the process; it names the file and rule.
func Load(path string, opts Options) (*Policy, error) {
	f, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Compile(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
