package runs

import "testing"

func TestApproverAndCallerKeys(t *testing.T) {
	role := ApproverKey("arn:aws:iam::123456789012:role/Approvers")
	if role == "" || ApproverKey("arn:aws:sts::123456789012:assumed-role/Approvers/s1") != role || CallerKey("arn:aws:sts::123456789012:assumed-role/Approvers/s1") != role {
		t.Errorf("a role's sessions must share the role's key %q", role)
	}
	if got := CallerKey("group:sre"); got != "" {
		t.Errorf("CallerKey(group:sre) = %q, want \"\": a group is never a caller", got)
	}
	if got := ApproverKey("group:sre"); got != "group:sre" {
		t.Errorf("ApproverKey(group:sre) = %q, want group:sre", got)
	}
	for _, in := range []string{"group:", "two words", ""} {
		if ApproverKey(in) != "" || CallerKey(in) != "" {
			t.Errorf("%q names no principal: want empty keys, got %q and %q", in, ApproverKey(in), CallerKey(in))
		}
	}
	if ApproverKey("Dana+ops@Example.COM") != CallerKey("dana@example.com") || CallerKey("Bob") != ApproverKey("bob") {
		t.Error("case and +tags must not split a principal's inbox")
	}
}
