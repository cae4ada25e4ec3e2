package identity

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is how a principal is named.
type Kind uint8

// The kinds of principal.
const (
	KindEmail Kind = iota + 1 // an e-mail address (addr-spec only)
	KindIAM                   // an IAM user, role, assumed-role session, federated user or account root ARN
	KindLocal                 // a local bearer-token name of `agentgate serve`
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindEmail:
		return "email"
	case KindIAM:
		return "iam"
	case KindLocal:
		return "local"
	}
	return "invalid"
}

// Limits on principal names.
const (
	MaxPrincipalLen = 320 // any principal
	maxEmailLocal   = 64
	maxEmailDomain  = 253
	maxLocalName    = 64
	maxIAMName      = 64
	maxIAMPath      = 512
)

// GroupPrefix starts an approver entry that names a directory group.
const GroupPrefix = "group:"

// Principal is a parsed identity. The zero Principal is invalid and equal
// to no other principal.
type Principal struct {
	kind    Kind
	text    string // canonical form for display and audit
	key     string // comparison form
	session string // assumed-role session name, kept for the audit
}

// Parse parses a principal strictly: one e-mail addr-spec (no display name,
// no comments, no quoted local part), an IAM ARN, or a local name
// (letters, digits, '.', '_', '-'). Control characters, white space,
// Unicode separators and any non-ASCII character are refused, so two
// names that look alike are either the same principal or not valid.
func Parse(s string) (Principal, error) {
	if s == "" {
		return Principal{}, fmt.Errorf("empty principal")
	}
	if len(s) > MaxPrincipalLen {
		return Principal{}, fmt.Errorf("principal %.24q… is longer than %d bytes", s, MaxPrincipalLen)
	}
	if err := checkChars(s); err != nil {
		return Principal{}, fmt.Errorf("principal %q: %w", s, err)
	}
	var (
		p   Principal
		err error
	)
	switch {
	case strings.HasPrefix(s, "arn:"):
		p, err = parseARN(s)
	case strings.HasPrefix(s, GroupPrefix):
		return Principal{}, fmt.Errorf("%q names a group, not a principal", s)
	case strings.Contains(s, "@"):
		p, err = parseEmail(s)
	default:
		p, err = parseLocal(s)
	}
	if err != nil {
		return Principal{}, fmt.Errorf("principal %q: %w", s, err)
	}
	return p, nil
}

// MustParse is Parse for constants in tests and examples; it panics on error.
func MustParse(s string) Principal {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

func checkChars(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("not valid UTF-8 at byte %d", i)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			return fmt.Errorf("control character U+%04X at byte %d", r, i)
		case unicode.IsSpace(r) || unicode.In(r, unicode.Z):
			return fmt.Errorf("space or separator U+%04X at byte %d", r, i)
		case unicode.In(r, unicode.Cf):
			return fmt.Errorf("invisible format character U+%04X at byte %d", r, i)
		case r > 0x7e:
			return fmt.Errorf("non-ASCII character U+%04X at byte %d (principals are ASCII, so look-alike names cannot be told apart wrongly)", r, i)
		}
	}
	return nil
}

// Kind returns how the principal is named.
func (p Principal) Kind() Kind { return p.kind }

// IsZero reports whether p is the zero (invalid) Principal.
func (p Principal) IsZero() bool { return p.kind == 0 }

// String returns the canonical form, for display and the audit: an e-mail
// address with its domain lowercased, an ARN or local name as given.
func (p Principal) String() string { return p.text }

// Key returns the comparison form. Two principals without directory
// entries are the same when their keys are equal: e-mail local part and
// domain lowercased with any "+tag" dropped; IAM ARNs reduced to the
// account and the lowercased user or role name (an assumed-role session
// becomes its role, paths are dropped); local names lowercased. Keys of
// different kinds never collide.
func (p Principal) Key() string { return p.key }

// Session returns the session name of an assumed-role ARN, "" otherwise.
func (p Principal) Session() string { return p.session }

// Mailbox returns the address to send mail to, for e-mail principals.
func (p Principal) Mailbox() (string, bool) {
	if p.kind != KindEmail {
		return "", false
	}
	return p.text, true
}

// Same reports whether p and q are the same principal by key (no
// directory). Zero principals are the same as nothing.
func (p Principal) Same(q Principal) bool {
	return p.kind != 0 && p.kind == q.kind && p.key == q.key
}

// IsSession reports whether p is an assumed-role session ARN.
func (p Principal) IsSession() bool { return p.session != "" }

// MarshalText returns the canonical form.
func (p Principal) MarshalText() ([]byte, error) {
	if p.kind == 0 {
		return nil, fmt.Errorf("marshal zero principal")
	}
	return []byte(p.text), nil
}

// UnmarshalText parses a principal (see Parse).
func (p *Principal) UnmarshalText(b []byte) error {
	q, err := Parse(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// --- e-mail ---

func parseEmail(s string) (Principal, error) {
	if strings.ContainsAny(s, "<>") {
		return Principal{}, fmt.Errorf("display names and angle brackets are not accepted; give the bare address")
	}
	if strings.ContainsAny(s, `"(),;:[]\`) {
		return Principal{}, fmt.Errorf("quoted local parts, comments, address lists and address literals are not accepted")
	}
	if strings.Count(s, "@") != 1 {
		return Principal{}, fmt.Errorf("an e-mail address has exactly one '@'")
	}
	local, domain, _ := strings.Cut(s, "@")
	if err := checkLocalPart(local); err != nil {
		return Principal{}, err
	}
	if err := checkDomain(domain); err != nil {
		return Principal{}, err
	}
	domain = strings.ToLower(domain)
	person := strings.ToLower(local)
	if i := strings.IndexByte(person, '+'); i > 0 {
		person = person[:i]
	}
	return Principal{kind: KindEmail, text: local + "@" + domain, key: person + "@" + domain}, nil
}

func checkLocalPart(local string) error {
	switch {
	case local == "":
		return fmt.Errorf("empty local part")
	case len(local) > maxEmailLocal:
		return fmt.Errorf("local part longer than %d characters", maxEmailLocal)
	case local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, ".."):
		return fmt.Errorf("local part must not start or end with '.' or contain '..'")
	}
	for i := 0; i < len(local); i++ {
		if !atext(local[i]) && local[i] != '.' {
			return fmt.Errorf("character %q is not allowed in the local part", local[i])
		}
	}
	return nil
}

// atext is RFC 5322 atext (ASCII only).
func atext(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

func checkDomain(domain string) error {
	if domain == "" {
		return fmt.Errorf("empty domain")
	}
	if len(domain) > maxEmailDomain {
		return fmt.Errorf("domain longer than %d characters", maxEmailDomain)
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("domain %q: labels are 1 to 63 characters", domain)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("domain %q: a label must not start or end with '-'", domain)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("domain %q: character %q is not allowed (letters, digits, '-')", domain, c)
			}
		}
	}
	return nil
}

// --- local names ---

func parseLocal(s string) (Principal, error) {
	if len(s) > maxLocalName {
		return Principal{}, fmt.Errorf("local names are at most %d characters", maxLocalName)
	}
	if !alnum(s[0]) {
		return Principal{}, fmt.Errorf("a local name starts with a letter or digit")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return Principal{}, fmt.Errorf("character %q is not allowed in a local name (letters, digits, '.', '_', '-')", c)
		}
	}
	return Principal{kind: KindLocal, text: s, key: strings.ToLower(s)}, nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// --- IAM ARNs ---

func parseARN(s string) (Principal, error) {
	f := strings.SplitN(s, ":", 6)
	if len(f) != 6 {
		return Principal{}, fmt.Errorf("an ARN has six ':'-separated fields")
	}
	partition, service, region, account, resource := f[1], f[2], f[3], f[4], f[5]
	if !validPartition(partition) {
		return Principal{}, fmt.Errorf("unknown partition %q", partition)
	}
	if service != "iam" && service != "sts" {
		return Principal{}, fmt.Errorf("service %q: only iam and sts ARNs name principals", service)
	}
	if region != "" {
		return Principal{}, fmt.Errorf("IAM and STS principal ARNs have no region")
	}
	if len(account) != 12 || strings.Trim(account, "0123456789") != "" {
		return Principal{}, fmt.Errorf("account %q is not 12 digits", account)
	}
	prefix := "arn:" + partition + ":"
	switch service {
	case "iam":
		if resource == "root" {
			return Principal{kind: KindIAM, text: s, key: prefix + "iam::" + account + ":root"}, nil
		}
		typ, rest, _ := strings.Cut(resource, "/")
		if typ != "user" && typ != "role" {
			return Principal{}, fmt.Errorf("IAM principals are user/..., role/... or root, not %q", resource)
		}
		name, err := pathAndName(rest)
		if err != nil {
			return Principal{}, fmt.Errorf("%s: %w", typ, err)
		}
		return Principal{kind: KindIAM, text: s, key: prefix + "iam::" + account + ":" + typ + "/" + strings.ToLower(name)}, nil
	case "sts":
		typ, rest, _ := strings.Cut(resource, "/")
		switch typ {
		case "assumed-role":
			role, session, ok := strings.Cut(rest, "/")
			if !ok || strings.Contains(session, "/") {
				return Principal{}, fmt.Errorf("an assumed-role ARN is assumed-role/<role name>/<session name>")
			}
			if err := iamName(role, 1); err != nil {
				return Principal{}, fmt.Errorf("role name: %w", err)
			}
			if err := iamName(session, 2); err != nil {
				return Principal{}, fmt.Errorf("session name: %w", err)
			}
			return Principal{kind: KindIAM, text: s, key: prefix + "iam::" + account + ":role/" + strings.ToLower(role), session: session}, nil
		case "federated-user":
			if err := iamName(rest, 2); err != nil {
				return Principal{}, fmt.Errorf("federated user name: %w", err)
			}
			return Principal{kind: KindIAM, text: s, key: prefix + "sts::" + account + ":federated-user/" + strings.ToLower(rest)}, nil
		}
		return Principal{}, fmt.Errorf("STS principals are assumed-role/... or federated-user/..., not %q", resource)
	}
	return Principal{}, fmt.Errorf("service %q: only iam and sts ARNs name principals", service)
}

func validPartition(p string) bool {
	if p != "aws" && !strings.HasPrefix(p, "aws-") {
		return false
	}
	for _, part := range strings.Split(p, "-")[1:] {
		if part == "" || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz") != "" {
			return false
		}
	}
	return true
}

// pathAndName splits "path/segments/Name" (the path is optional) and checks
// both; IAM paths are ignored for matching, role and user names are unique
// per account whatever their path.
func pathAndName(rest string) (string, error) {
	i := strings.LastIndexByte(rest, '/')
	path, name := rest[:i+1], rest[i+1:]
	if len(path) > maxIAMPath {
		return "", fmt.Errorf("path longer than %d characters", maxIAMPath)
	}
	if strings.Contains(path, "//") || strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("path %q has an empty segment", path)
	}
	if err := iamName(name, 1); err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	return name, nil
}

// iamName checks an IAM user, role or session name: [\w+=,.@-]{min,64}.
func iamName(s string, min int) error {
	if len(s) < min || len(s) > maxIAMName {
		return fmt.Errorf("%q must be %d to %d characters", s, min, maxIAMName)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && strings.IndexByte("_+=,.@-", c) < 0 {
			return fmt.Errorf("%q: character %q is not allowed", s, c)
		}
	}
	return nil
}
