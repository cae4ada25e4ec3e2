package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFile: --token-file reads principal=token lines (blank lines and
// comments skipped, spaces around = dropped) beside --token; a bad line (an
// empty side, a short token or one with a space inside) is named by its
// number and never echoes a token; one token for two principals is refused.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# local approvers\nalice=aaaaaaaaaaaaaaaa1111\n\n  bob=bbbbbbbbbbbbbbbb2222  \r\n dave = dddddddddddddddd5555 \n")
	var tokens tokenFlag
	if err := tokens.Set("carol =\tcccccccccccccccc3333"); err != nil {
		t.Fatal(err)
	}
	if err := tokens.readFile(good); err != nil {
		t.Fatal(err)
	}
	// Spaces around the = are dropped: a token that began with one could
	// never be sent.
	want := map[string]string{"aaaaaaaaaaaaaaaa1111": "alice", "bbbbbbbbbbbbbbbb2222": "bob", "cccccccccccccccc3333": "carol", "dddddddddddddddd5555": "dave"}
	if len(tokens) != len(want) {
		t.Fatalf("tokens %v, want %v", tokens, want)
	}
	for tok, p := range want {
		if tokens[tok] != p {
			t.Errorf("token of %s: got principal %q", p, tokens[tok])
		}
	}

	for _, tt := range []struct{ name, text, msg string }{
		{"short token", "alice=aaaaaaaaaaaaaaaa1111\ndave=short-secret\n", "line 2"},
		{"no principal", "=dddddddddddddddd4444\n", "line 1"},
		{"only spaces before the =", "alice=aaaaaaaaaaaaaaaa1111\n   = dddddddddddddddd4444\n", "line 2"},
		{"only spaces after the =", "frank =   \n", "line 1"},
		{"a space inside the token", "\nfrank=dddddddddddddddd4444 short-secret\n", "line 2: the token has a space inside"},
		{"token of two principals", "eve=aaaaaaaaaaaaaaaa1111\n", "two principals"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tokens.readFile(write(tt.name, tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want one with %q", err, tt.msg)
			}
			for _, secret := range []string{"short-secret", "dddddddddddddddd4444", "aaaaaaaaaaaaaaaa1111"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a token", err)
				}
			}
		})
	}
	if err := tokens.readFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file is an error")
	}
}
