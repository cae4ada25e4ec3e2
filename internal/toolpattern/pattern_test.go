package toolpattern

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"write_document", "write_document", true},
		{"write_document", "write_documents", false},
		{"write_document", "Write_document", false},
		{"*", "anything", true},
		{"*", "", true},
		{"github__*", "github__create_issue", true},
		{"github__*", "github__", true},
		{"github__*", "gitlab__create_issue", false},
		{"github__*", "xgithub__create_issue", false},
		{"*__delete_*", "s3__delete_object", true},
		{"*__delete_*", "delete_document", false},
		{"*_document", "write_document", true},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "aXbYbZc", true},
		{"**", "x", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"/"+tt.name, func(t *testing.T) {
			p, err := Parse(tt.pattern)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.pattern, err)
			}
			if got := p.Match(tt.name); got != tt.want {
				t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "write document", "a?b", "[ab]", `a\*`, "a/b", "é", string(make([]byte, MaxLen+1))} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted, want an error", s)
		}
	}
	if _, err := Parse("aé"); err == nil || !strings.Contains(err.Error(), `character 'é'`) {
		t.Errorf("Parse(aé) = %v, want the character named as it is", err)
	}
	if _, err := Parse(strings.Repeat("a", MaxLen)); err != nil {
		t.Errorf("a pattern of %d characters: %v", MaxLen, err)
	}
}

func TestZeroPatternMatchesNothing(t *testing.T) {
	var p Pattern
	if p.Match("") || p.Match("x") {
		t.Error("zero Pattern matched, want no match")
	}
}

func TestParseListNamesIndex(t *testing.T) {
	_, err := ParseList([]string{"ok", "bad pattern"})
	if err == nil || err.Error()[:3] != "[1]" {
		t.Errorf("ParseList error = %v, want it to start with [1]", err)
	}
}
