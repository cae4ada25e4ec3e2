package identity

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseCanonicalForms(t *testing.T) {
	tests := []struct {
		in, text, key, session string
		kind                   Kind
	}{
		{"ann@example.com", "ann@example.com", "ann@example.com", "", KindEmail},
		{"Ann@Example.COM", "Ann@example.com", "ann@example.com", "", KindEmail},
		{"ann+x@example.com", "ann+x@example.com", "ann@example.com", "", KindEmail},
		{"ANN+Ops+2@example.com", "ANN+Ops+2@example.com", "ann@example.com", "", KindEmail},
		{"+x@example.com", "+x@example.com", "+x@example.com", "", KindEmail},
		{"o'brien.j@mail.example.co.uk", "o'brien.j@mail.example.co.uk", "o'brien.j@mail.example.co.uk", "", KindEmail},
		{"bob@localhost", "bob@localhost", "bob@localhost", "", KindEmail},
		{"arn:aws:iam::123456789012:user/ann", "arn:aws:iam::123456789012:user/ann", "arn:aws:iam::123456789012:user/ann", "", KindIAM},
		{"arn:aws:iam::123456789012:user/division/team/Ann", "arn:aws:iam::123456789012:user/division/team/Ann", "arn:aws:iam::123456789012:user/ann", "", KindIAM},
		{"arn:aws:iam::123456789012:role/Deployer", "arn:aws:iam::123456789012:role/Deployer", "arn:aws:iam::123456789012:role/deployer", "", KindIAM},
		{"arn:aws:iam::123456789012:role/team/Deployer", "arn:aws:iam::123456789012:role/team/Deployer", "arn:aws:iam::123456789012:role/deployer", "", KindIAM},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/ann-session", "arn:aws:sts::123456789012:assumed-role/Deployer/ann-session", "arn:aws:iam::123456789012:role/deployer", "ann-session", KindIAM},
		{"arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0123/ann@example.com", "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0123/ann@example.com", "arn:aws:iam::123456789012:role/awsreservedsso_admin_0123", "ann@example.com", KindIAM},
		{"arn:aws-cn:iam::123456789012:user/li", "arn:aws-cn:iam::123456789012:user/li", "arn:aws-cn:iam::123456789012:user/li", "", KindIAM},
		{"arn:aws-us-gov:iam::123456789012:root", "arn:aws-us-gov:iam::123456789012:root", "arn:aws-us-gov:iam::123456789012:root", "", KindIAM},
		{"arn:aws:sts::123456789012:federated-user/Bob", "arn:aws:sts::123456789012:federated-user/Bob", "arn:aws:sts::123456789012:federated-user/bob", "", KindIAM},
		{"local-user", "local-user", "local-user", "", KindLocal},
		{"Alice", "Alice", "alice", "", KindLocal},
		{"svc.ci_2", "svc.ci_2", "svc.ci_2", "", KindLocal},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if p.Kind() != tt.kind || p.String() != tt.text || p.Key() != tt.key || p.Session() != tt.session {
				t.Errorf("Parse(%q) = kind %v text %q key %q session %q, want %v %q %q %q",
					tt.in, p.Kind(), p.String(), p.Key(), p.Session(), tt.kind, tt.text, tt.key, tt.session)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ in, wantMsg string }{
		{"", "empty"},
		{"Ann <ann@example.com>", "space"},
		{"<ann@example.com>", "display names"},
		{"ann@example.com, bob@example.com", "space"},
		{"ann@example.com,bob@example.com", "address lists"},
		{`"ann"@example.com`, "quoted"},
		{"ann(comment)@example.com", "comments"},
		{"ann@[192.0.2.1]", "literals"},
		{"ann@@example.com", "exactly one"},
		{"ann@bob@example.com", "exactly one"},
		{"@example.com", "empty local part"},
		{"ann@", "empty domain"},
		{".ann@example.com", "start or end"},
		{"an..n@example.com", "'..'"},
		{"ann@example..com", "labels"},
		{"ann@-example.com", "'-'"},
		{"ann@exa_mple.com", "not allowed"},
		{"ann\x00@example.com", "control character"},
		{"ann\n@example.com", "control character"},
		{"ann\u0085@example.com", "control character"},
		{"ann\u00a0@example.com", "separator"},
		{"ann\u2028@example.com", "separator"},
		{"ann\u3000@example.com", "separator"},
		{"ann\u200b@example.com", "format character"},
		{"ann\u202e@example.com", "format character"},
		{"ann@ex\u0430mple.com", "non-ASCII"},      // Cyrillic а
		{"\u212Ann@example.com", "non-ASCII"},      // Kelvin sign lowercases to k
		{"ann@example.com\xff", "not valid UTF-8"}, // broken UTF-8
		{strings.Repeat("a", 65) + "@example.com", "local part longer"},
		{strings.Repeat("a", MaxPrincipalLen+1), "longer than"},
		{"group:ops", "names a group"},
		{"-bob", "starts with"},
		{"bob/smith", "not allowed in a local name"},
		{"bob:smith", "not allowed in a local name"},
		{strings.Repeat("b", 65), "at most"},
		{"arn:aws:iam::123456789012", "six"},
		{"arn:aws:s3:::bucket/key", "only iam and sts"},
		{"arn:aws:s3::123456789012:bucket", "only iam and sts"},
		{"arn:aws:iam:us-east-1:123456789012:user/ann", "no region"},
		{"arn:aws:iam::12345:user/ann", "12 digits"},
		{"arn:evil:iam::123456789012:user/ann", "partition"},
		{"arn:aws-:iam::123456789012:user/ann", "partition"},
		{"arn:aws:iam::123456789012:group/admins", "user/..., role/..."},
		{"arn:aws:iam::123456789012:user/", "name"},
		{"arn:aws:iam::123456789012:role//Deployer", "empty segment"},
		{"arn:aws:iam::123456789012:role/Deploy*", "not allowed"},
		{"arn:aws:iam::123456789012:user/" + strings.Repeat("a", 65), "64"},
		{"arn:aws:sts::123456789012:assumed-role/Deployer", "assumed-role/<role name>/<session name>"},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/s/x", "assumed-role/<role name>/<session name>"},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/s", "session name"},
		{"arn:aws:sts::123456789012:user/ann", "STS principals"},
		{"ARN:aws:iam::123456789012:user/ann", "not allowed in a local name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error containing %q", tt.in, p.String(), tt.wantMsg)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Parse(%q) error %q, want it to contain %q", tt.in, err, tt.wantMsg)
			}
		})
	}
}

func TestSame(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"ann@example.com", "Ann@Example.com", true},
		{"ann@example.com", "ann+x@example.com", true},
		{"ann+a@example.com", "ANN+b@EXAMPLE.COM", true},
		{"ann@example.com", "ann@example.org", false},
		{"ann@example.com", "anne@example.com", false},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/ann", "arn:aws:iam::123456789012:role/Deployer", true},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/ann", "arn:aws:iam::123456789012:role/ci/deployer", true},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/ann", "arn:aws:sts::123456789012:assumed-role/Deployer/bob", true},
		{"arn:aws:sts::123456789012:assumed-role/Deployer/ann", "arn:aws:iam::123456789012:user/Deployer", false},
		{"arn:aws:iam::123456789012:role/Deployer", "arn:aws:iam::210987654321:role/Deployer", false},
		{"arn:aws:iam::123456789012:role/Deployer", "arn:aws-cn:iam::123456789012:role/Deployer", false},
		{"arn:aws:iam::123456789012:user/ann", "ann@example.com", false},
		{"alice", "Alice", true},
		{"alice", "alice@example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+"~"+tt.b, func(t *testing.T) {
			a, b := MustParse(tt.a), MustParse(tt.b)
			if got := a.Same(b); got != tt.want {
				t.Errorf("%q.Same(%q) = %v, want %v (keys %q, %q)", tt.a, tt.b, got, tt.want, a.Key(), b.Key())
			}
			if got := b.Same(a); got != tt.want {
				t.Errorf("%q.Same(%q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
			}
		})
	}
	var zero Principal
	if zero.Same(zero) || zero.Same(MustParse("a")) {
		t.Error("the zero principal is the same as something, want nothing")
	}
}

func TestPrincipalJSON(t *testing.T) {
	var v struct{ P Principal }
	if err := json.Unmarshal([]byte(`{"P":"Ann@Example.com"}`), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"P":"Ann@example.com"}` {
		t.Errorf("round trip = %s, want the canonical form", b)
	}
	if err := json.Unmarshal([]byte(`{"P":"Ann <ann@example.com>"}`), &v); err == nil {
		t.Error("unmarshal of a display name accepted, want an error")
	}
	if _, err := json.Marshal(struct{ P Principal }{}); err == nil {
		t.Error("marshal of the zero principal accepted, want an error")
	}
}

func TestMailbox(t *testing.T) {
	if m, ok := MustParse("Ann+x@Example.com").Mailbox(); !ok || m != "Ann+x@example.com" {
		t.Errorf("Mailbox = %q, %v; want the address as given with the domain lowercased", m, ok)
	}
	if _, ok := MustParse("arn:aws:iam::123456789012:user/ann").Mailbox(); ok {
		t.Error("an ARN has a mailbox, want none")
	}
}
