package identity

import (
	"errors"
	"strings"
	"testing"
)

func mustRunApprovers(t *testing.T, d *Directory, entries ...string) *ApproverList {
	t.Helper()
	l, err := d.RunApprovers(entries)
	if err != nil {
		t.Fatalf("RunApprovers(%q): %v", entries, err)
	}
	return l
}

func reason(err error) Reason {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	if err != nil {
		return "not a refusal: " + Reason(err.Error())
	}
	return ""
}

// TestFourEyesBypassAttempts covers every way issue 14 found to approve
// one's own run, and a few more. Each is refused with reason four_eyes.
func TestFourEyesBypassAttempts(t *testing.T) {
	d := testDirectory(t)
	var noDir *Directory
	tests := []struct {
		name       string
		dir        *Directory
		initiator  string
		approvers  []string
		decider    string
		wantReason Reason
	}{
		{"case variant, no directory", noDir, "ann@example.com", []string{"Ann@Example.com"}, "Ann@Example.com", ReasonFourEyes},
		{"+tag, no directory", noDir, "ann@example.com", []string{"ann+x@example.com"}, "ann+x@example.com", ReasonFourEyes},
		{"+tag initiator, no directory", noDir, "ann+work@example.com", []string{"ANN@example.com"}, "ANN@example.com", ReasonFourEyes},
		{"case variant of a local name", noDir, "alice", []string{"Alice"}, "ALICE", ReasonFourEyes},
		{"IAM initiator, e-mail alias approves", d, "arn:aws:iam::123456789012:user/ann", []string{"ann@example.com"}, "ann@example.com", ReasonFourEyes},
		{"e-mail initiator, IAM alias approves", d, "ann@example.com", []string{"arn:aws:iam::123456789012:user/ann"}, "arn:aws:iam::123456789012:user/ann", ReasonFourEyes},
		{"IAM initiator with a path, e-mail approves", d, "arn:aws:iam::123456789012:user/staff/Ann", []string{"Ann+Me@Example.com"}, "ann+me@example.com", ReasonFourEyes},
		{"local name initiator, tagged e-mail approves", d, "ann", []string{"ann+1@example.com"}, "ann+1@example.com", ReasonFourEyes},
		{"assumed-role session vs role, no directory", noDir, "arn:aws:sts::123456789012:assumed-role/Deployer/monday", []string{"arn:aws:iam::123456789012:role/Deployer"}, "arn:aws:sts::123456789012:assumed-role/Deployer/tuesday", ReasonFourEyes},
		{"assumed-role session vs role with path", noDir, "arn:aws:sts::123456789012:assumed-role/Deployer/s1", []string{"arn:aws:iam::123456789012:role/ops/deployer"}, "arn:aws:iam::123456789012:role/ops/Deployer", ReasonFourEyes},
		{"session of the person's role vs their e-mail", d, "arn:aws:sts::123456789012:assumed-role/BobAdmin/laptop", []string{"bob+x@example.com"}, "bob@example.com", ReasonFourEyes},
		{"initiator in a named group", d, "ann@example.com", []string{"group:ops"}, "ann@example.com", ReasonFourEyes},
		{"initiator in a named group, other alias", d, "ann@example.com", []string{"group:ops"}, "arn:aws:iam::123456789012:user/ann", ReasonFourEyes},
		// the second person is fine
		{"another person of the group", d, "ann@example.com", []string{"group:ops"}, "carol", ""},
		{"another person by IAM", d, "ann@example.com", []string{"group:ops"}, "arn:aws:sts::123456789012:assumed-role/BobAdmin/laptop", ""},
		{"another address, no directory", noDir, "ann@example.com", []string{"anne@example.com"}, "anne@example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustRunApprovers(t, tt.dir, tt.approvers...)
			err := tt.dir.MayDecide(MustParse(tt.decider), MustParse(tt.initiator), Requirement{Tool: "write_document", Approvers: l, FourEyes: true})
			if got := reason(err); got != tt.wantReason {
				t.Errorf("MayDecide(%s) = %q (%v), want %q", tt.decider, got, err, tt.wantReason)
			}
			if tt.wantReason != "" {
				// Without four-eyes the same person may decide: the refusal is four-eyes, nothing else.
				if err := tt.dir.MayDecide(MustParse(tt.decider), MustParse(tt.initiator), Requirement{Tool: "write_document", Approvers: l}); err != nil {
					t.Errorf("without four-eyes MayDecide = %v, want nil", err)
				}
				for _, e := range tt.dir.Eligible(MustParse(tt.initiator), Requirement{Tool: "write_document", Approvers: l, FourEyes: true}) {
					if e.Subject.Same(tt.dir.Lookup(MustParse(tt.initiator))) {
						t.Errorf("Eligible includes the initiator %s under four-eyes", e.Subject)
					}
				}
			}
		})
	}
}

func TestMayDecide(t *testing.T) {
	d := testDirectory(t)
	ops := mustRunApprovers(t, d, "group:ops")
	finance := mustRunApprovers(t, d, "group:finance")
	direct := mustRunApprovers(t, d, "dave@example.com", "ann@example.com", "outsider@example.org")
	ann := "ann@example.com"
	tests := []struct {
		name    string
		decider string
		reqs    []Requirement
		want    Reason
	}{
		{"group member", "carol@example.com", []Requirement{{Tool: "delete_document", Approvers: ops}}, ""},
		{"not a member", "dave@example.com", []Requirement{{Tool: "delete_document", Approvers: ops}}, ReasonNotApprover},
		{"stranger", "mallory@example.com", []Requirement{{Tool: "delete_document", Approvers: ops}}, ReasonNotApprover},
		{"zero decider", "", []Requirement{{Tool: "delete_document", Approvers: ops}}, ReasonInvalid},
		{"finance member, payments tool", "arn:aws:iam::123456789012:user/erin", []Requirement{{Tool: "payments__refund", Approvers: finance}}, ""},
		{"finance member, tool outside the group", "arn:aws:iam::123456789012:user/erin", []Requirement{{Tool: "delete_document", Approvers: finance}}, ReasonToolGate},
		{"person limit beats group", "dave@example.com", []Requirement{{Tool: "payments__refund", Approvers: finance}}, ReasonToolGate},
		{"person limit, allowed tool", "dave@example.com", []Requirement{{Tool: "write_document", Approvers: finance}}, ""},
		{"person limit when named directly", "dave@example.com", []Requirement{{Tool: "delete_document", Approvers: direct}}, ReasonToolGate},
		{"bob via ops despite finance limit", "bob@example.com", []Requirement{{Tool: "delete_document", Approvers: mustRunApprovers(t, d, "group:finance", "group:ops")}}, ""},
		{"every call is checked", "carol", []Requirement{{Tool: "write_document", Approvers: ops}, {Tool: "payments__refund", Approvers: finance}}, ReasonNotApprover},
		{"outsider named directly", "Outsider+x@EXAMPLE.org", []Requirement{{Tool: "anything", Approvers: direct}}, ""},
		{"service account", "arn:aws:sts::123456789012:assumed-role/ci-runner/job-1", []Requirement{{Tool: "write_document", Approvers: ops}}, ReasonServiceAccount},
		{"no requirements", "carol", nil, ReasonInvalid},
		{"empty tool", "carol", []Requirement{{Approvers: ops}}, ReasonInvalid},
		{"nil approvers", "carol", []Requirement{{Tool: "write_document"}}, ReasonInvalid},
		// Four-eyes refuses the initiator only where they would otherwise
		// be eligible: merely not being an approver is not four-eyes.
		{"the initiator, an approver, under four-eyes", ann, []Requirement{{Tool: "delete_document", Approvers: ops, FourEyes: true}}, ReasonFourEyes},
		{"the initiator, not an approver, under four-eyes", ann, []Requirement{{Tool: "payments__refund", Approvers: finance, FourEyes: true}}, ReasonNotApprover},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var decider Principal
			if tt.decider != "" {
				decider = MustParse(tt.decider)
			}
			err := d.MayDecide(decider, MustParse(ann), tt.reqs...)
			if got := reason(err); got != tt.want {
				t.Errorf("MayDecide = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
	if err := d.MayDecide(MustParse("carol"), Principal{}, Requirement{Tool: "x", Approvers: ops}); reason(err) != ReasonInvalid {
		t.Errorf("zero initiator = %v, want invalid (fail closed)", err)
	}
}

func TestRunApprovers(t *testing.T) {
	d := testDirectory(t)
	groupsOnly, err := DecodeDirectory([]byte(`{"version":1,"group_approvers_only":true,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]}],
		"groups":[{"name":"ops","members":["ann","bob"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     *Directory
		entries []string
		want    string // "" = accepted
	}{
		{"principals and groups", d, []string{"group:ops", "dave@example.com", "outsider@example.org"}, ""},
		{"unknown group", d, []string{"group:admins"}, `approvers[0] "group:admins": no such group`},
		{"group without a directory", nil, []string{"group:ops"}, "no such group"},
		{"same person twice by alias", d, []string{"ann@example.com", "arn:aws:iam::123456789012:user/ann"}, `approvers[1] "arn:aws:iam::123456789012:user/ann": the same person as approvers[0]`},
		{"same address twice by case", nil, []string{"x@example.com", "X+1@example.com"}, "the same person as approvers[0]"},
		{"group twice", d, []string{"group:ops", "group:ops"}, "listed twice"},
		{"service account", d, []string{"ci-bot"}, "service accounts never decide"},
		{"session ARN", nil, []string{"arn:aws:sts::123456789012:assumed-role/R/s1"}, "name the role ARN"},
		{"display name", nil, []string{"Bob <bob@example.com>"}, "approvers[0]"},
		{"groups only: a group", groupsOnly, []string{"group:ops"}, ""},
		{"groups only: initiator adds themselves", groupsOnly, []string{"group:ops", "ann@example.com"}, `approvers[1] "ann@example.com": this deployment requires approvers to be groups`},
		{"groups only: a stranger", groupsOnly, []string{"mallory@example.com"}, "requires approvers to be groups"},
		{"too many", nil, strings.Split(strings.Repeat("a,", MaxApproverEntries+1), ","), "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.dir.RunApprovers(tt.entries)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("RunApprovers(%q) = %v, want accepted", tt.entries, err)
			case tt.want != "" && (!errors.Is(err, ErrInvalidApprovers) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("RunApprovers(%q) = %v, want an error containing %q", tt.entries, err, tt.want)
			}
		})
	}
	// A stored run naming a person still resolves after the deployment turns group-only on.
	if _, err := groupsOnly.ResolveApprovers("approvers", []string{"ann@example.com"}); err != nil {
		t.Errorf("ResolveApprovers on a group-only directory = %v, want the stored list to resolve", err)
	}
}

// TestRunToolExecutors: tool executors go through the approvers' checks
// (one person twice by two aliases was accepted for them while approvers
// refused it), except that a service account is accepted and a group-only
// directory does not apply.
func TestRunToolExecutors(t *testing.T) {
	d := testDirectory(t)
	groupsOnly, err := DecodeDirectory([]byte(`{"version":1,"group_approvers_only":true,
		"persons":[{"id":"ann","aliases":["ann@example.com"]}],"groups":[{"name":"ops","members":["ann"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		dir     *Directory
		entries []string
		want    string // "" = accepted
	}{
		{"principals, groups and a service account", d, []string{"group:ops", "dave@example.com", "ci-bot"}, ""},
		{"same person twice by alias", d, []string{"ann@example.com", "arn:aws:iam::123456789012:user/ann"}, `tool_executors[1] "arn:aws:iam::123456789012:user/ann": the same person as tool_executors[0]`},
		{"unknown group", d, []string{"group:admins"}, `tool_executors[0] "group:admins": no such group`},
		{"group twice", d, []string{"group:ops", "group:ops"}, "listed twice"},
		{"session ARN", nil, []string{"arn:aws:sts::123456789012:assumed-role/R/s1"}, "name the role ARN"},
		{"a person on a group-only directory", groupsOnly, []string{"ann@example.com"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.dir.RunToolExecutors(tt.entries)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("RunToolExecutors(%q) = %v, want accepted", tt.entries, err)
			case tt.want != "" && (!errors.Is(err, ErrInvalidApprovers) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("RunToolExecutors(%q) = %v, want an error containing %q", tt.entries, err, tt.want)
			}
		})
	}
}

func TestEligible(t *testing.T) {
	d := testDirectory(t)
	ops := mustRunApprovers(t, d, "group:ops", "ann+again@example.com", "outsider@example.org", "arn:aws:iam::123456789012:user/zed")
	finance := mustRunApprovers(t, d, "group:finance")
	keys := func(es []Eligible) string {
		var s []string
		for _, e := range es {
			s = append(s, e.Subject.Key()+"="+e.Mailbox)
		}
		return strings.Join(s, " ")
	}
	tests := []struct {
		name      string
		initiator string
		reqs      []Requirement
		want      string
	}{
		{"a group and principals, deduplicated by person", "bob@example.com", []Requirement{{Tool: "write_document", Approvers: ops}},
			"person:ann=ann@example.com person:bob=bob@example.com person:carol=carol@example.com outsider@example.org=outsider@example.org arn:aws:iam::123456789012:user/zed="},
		{"four-eyes leaves the initiator out", "arn:aws:iam::123456789012:user/ann", []Requirement{{Tool: "write_document", Approvers: ops, FourEyes: true}},
			"person:bob=bob@example.com person:carol=carol@example.com outsider@example.org=outsider@example.org arn:aws:iam::123456789012:user/zed="},
		{"tool gate", "ann@example.com", []Requirement{{Tool: "payments__charge", Approvers: finance}},
			"person:bob=bob@example.com person:erin="},
		{"every call must be decidable", "ann@example.com", []Requirement{{Tool: "write_document", Approvers: ops}, {Tool: "write_document", Approvers: finance}},
			"person:bob=bob@example.com"},
		{"no tool: counting only", "ann@example.com", []Requirement{{Approvers: finance}},
			"person:bob=bob@example.com person:dave=dave@example.com person:erin="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keys(d.Eligible(MustParse(tt.initiator), tt.reqs...)); got != tt.want {
				t.Errorf("Eligible =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
	if got := d.Eligible(Principal{}, Requirement{Tool: "x", Approvers: ops, FourEyes: true}); len(got) != 0 {
		t.Errorf("Eligible with an unknown initiator under four-eyes = %d subjects, want none (fail closed)", len(got))
	}
}
