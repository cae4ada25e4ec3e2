package mcptool

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestScrubCutsTheQueryAsQuoted: a url.Error quotes its URL (%q), so a key
// holding a quote or a backslash appears escaped in the message; both
// spellings are cut, and errors.Is still sees the cause.
func TestScrubCutsTheQueryAsQuoted(t *testing.T) {
	s := Server{Name: "crm", URL: `http://127.0.0.1:9/mcp?key=Se"cr\et`}
	cause := errors.New("connection refused")
	for _, err := range []error{
		fmt.Errorf("Post %q: %w", s.URL, cause),
		fmt.Errorf("connect to %s: %w", s.URL, cause),
	} {
		got := s.scrub(err)
		for _, secret := range []string{`Se"cr\et`, `Se\"cr\\et`, "Se"} {
			if strings.Contains(got.Error(), secret) {
				t.Errorf("scrubbed %q still holds %q", got.Error(), secret)
			}
		}
		if !errors.Is(got, cause) {
			t.Error("the scrubbed error lost its cause")
		}
	}
}
