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

// TestServeBadTokenNamesThePrincipalOnly runs `agentgate serve` with a bad
// --token or --token-file: it exits 2 with a one-line usage error, as a bad
// --sweep-every does, that names the principal (or the file's line) and
// never the secret. The flag package used to quote the whole value
// ("invalid value \"alice=tooshortsecret\" for flag -token") and print
// every flag after it.
func TestServeBadTokenNamesThePrincipalOnly(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("alice=aaaaaaaaaaaaaaaa1111\nbob=tooshortsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		args    []string
		secret  string
		message string
	}{
		{"short", []string{"--token", "alice=tooshortsecret"}, "tooshortsecret", `agentgate serve: --token for "alice": token shorter than 16 characters`},
		{"space inside", []string{"--token", "alice=aaaaaaaaaaaa bbbbbbbbbbbbb"}, "aaaaaaaaaaaa bbbbbbbbbbbbb", `agentgate serve: --token for "alice": the token has a space inside`},
		{"two principals", []string{"--token", "alice=aaaaaaaaaaaaaaaa2222", "--token", "bob=aaaaaaaaaaaaaaaa2222"}, "aaaaaaaaaaaaaaaa2222", `agentgate serve: --token for "bob": one token is given for two principals (alice and bob)`},
		{"no principal", []string{"--token", "tooshortsecret"}, "tooshortsecret", `agentgate serve: --token: want principal=token`},
		{"file", []string{"--token-file", file}, "tooshortsecret", "agentgate serve: --token-file: " + file + " line 2: token shorter than 16 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--dir", t.TempDir()}, tt.args...)
			code := run(t.Context(), args, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			out := stdout.String() + stderr.String()
			if strings.Contains(out, tt.secret) {
				t.Errorf("the output shows the secret:\n%s", out)
			}
			if !strings.HasPrefix(stderr.String(), tt.message) {
				t.Errorf("stderr %q, want it to start with %q", stderr.String(), tt.message)
			}
			if want := "usage: agentgate serve -h lists its flags\n"; !strings.HasSuffix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 2 {
				t.Errorf("stderr %q, want one line and then %q, as other serve flag errors", stderr.String(), want)
			}
		})
	}
}
