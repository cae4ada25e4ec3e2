package service

import (
	"testing"
	"unicode/utf8"
)

// TestTruncateKeepsUTF8: a detail cut to its limit never splits a
// character (a run's output.detail is stored and shown as text), and
// oneLine folds white space before it cuts.
func TestTruncateKeepsUTF8(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"ééé", 3, "é…"}, // byte 3 is inside the second é
		{"abcdef", 3, "abc…"},
		{"a\n  b\tc", 100, "a\n  b\tc"},
	} {
		if got := truncate(tt.s, tt.n); got != tt.want || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
	if got := oneLine("a\n  b\tcé", 6); got != "a b c…" {
		t.Errorf("oneLine = %q", got)
	}
}
