package toolpattern

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen is the longest pattern accepted.
const MaxLen = 128

// Pattern is a parsed tool-name pattern.
type Pattern struct {
	text  string
	parts []string // literal pieces between the stars
}

// Parse checks a pattern and returns it.
func Parse(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, fmt.Errorf("empty tool pattern")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !nameByte(c) && c != '*' {
			r, _ := utf8.DecodeRuneInString(s[i:]) // the character, not its first byte
			return Pattern{}, fmt.Errorf("tool pattern %.40q: character %q is not allowed (tool names use letters, digits, '_', '-', '.'; '*' matches any run of characters)", s, r)
		}
	}
	if len(s) > MaxLen { // ASCII only by now: bytes are characters
		return Pattern{}, fmt.Errorf("tool pattern %.20q… is longer than %d characters", s, MaxLen)
	}
	return Pattern{text: s, parts: strings.Split(s, "*")}, nil
}

// ParseList parses every pattern of a list; the error names the index.
func ParseList(list []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(list))
	for i, s := range list {
		p, err := Parse(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.text }

// MayMatchUnder reports whether some tool name that starts with prefix
// could match the pattern (whatever follows the prefix).
func (p Pattern) MayMatchUnder(prefix string) bool {
	switch {
	case p.parts == nil:
		return false
	case len(p.parts) == 1:
		return strings.HasPrefix(p.parts[0], prefix)
	default:
		first := p.parts[0]
		return strings.HasPrefix(first, prefix) || strings.HasPrefix(prefix, first)
	}
}

// IsZero reports whether p is the zero Pattern (which matches nothing).
func (p Pattern) IsZero() bool { return p.parts == nil }

// Match reports whether the tool name matches the pattern. Matching is
// case-sensitive, as tool names are.
func (p Pattern) Match(name string) bool {
	if p.parts == nil {
		return false
	}
	if len(p.parts) == 1 {
		return name == p.parts[0]
	}
	first, last := p.parts[0], p.parts[len(p.parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	rest := name[len(first) : len(name)-len(last)]
	for _, mid := range p.parts[1 : len(p.parts)-1] {
		i := strings.Index(rest, mid)
		if i < 0 {
			return false
		}
		rest = rest[i+len(mid):]
	}
	return true
}

// AnyMatch reports whether any of the patterns matches the name.
func AnyMatch(ps []Pattern, name string) bool {
	for _, p := range ps {
		if p.Match(name) {
			return true
		}
	}
	return false
}
