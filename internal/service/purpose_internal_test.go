package service

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestShortPurpose: a purpose has at most 300 characters, the last one
// "…" when the text was cut, and always fits the row's purpose limit.
func TestShortPurpose(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       string
	}{
		{"short", "file the report", "file the report"},
		{"exactly 300", strings.Repeat("a", 300), strings.Repeat("a", 300)},
		{"301", strings.Repeat("a", 301), strings.Repeat("a", 299) + "…"},
		{"255 four-byte characters fit", strings.Repeat("😀", 255), strings.Repeat("😀", 255)},
		{"four-byte characters over the byte limit", strings.Repeat("😀", 300), strings.Repeat("😀", 255) + "…"},
		{"two-byte characters", strings.Repeat("é", 400), strings.Repeat("é", 299) + "…"},
	} {
		got := shortPurpose(tt.text)
		if got != tt.want {
			t.Errorf("%s: got %d characters %q…, want %d characters", tt.name, utf8.RuneCountInString(got), got[:min(20, len(got))], utf8.RuneCountInString(tt.want))
		}
		if n := utf8.RuneCountInString(got); n > MaxPurposeChars || len(got) > runs.MaxPurposeBytes || !utf8.ValidString(got) {
			t.Errorf("%s: %d characters, %d bytes, valid %v", tt.name, n, len(got), utf8.ValidString(got))
		}
	}
}
