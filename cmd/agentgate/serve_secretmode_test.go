package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/webhook"
)

// TestServeWarnsOfSecretFilesOthersCanRead: a --token-file or
// --webhook-secret-file that group or others may read is named in a
// warning at start, with its mode; one of mode 0600 is not.
func TestServeWarnsOfSecretFilesOthersCanRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not show Windows permissions")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("alice=aaaaaaaaaaaaaaaa1111\n"), 0o600))
	secret, err := webhook.GenerateSecret()
	require.NoError(t, err)
	whsec := filepath.Join(dir, "whsec")
	require.NoError(t, os.WriteFile(whsec, []byte(secret+"\n"), 0o600))

	// A cancelled context: serve starts, logs, and stops at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	serve := func() string {
		t.Helper()
		out := &syncBuffer{} // the sweep logs from its own goroutine
		require.NoError(t, runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", filepath.Join(dir, "store"),
			"--token-file", tokens, "--webhook-secret-file", whsec}, out))
		return out.String()
	}
	out := serve()
	assert.NotContains(t, out, "secret file is open to other local users", "both files are 0600")

	require.NoError(t, os.Chmod(tokens, 0o644)) //nolint:gosec // the mode under test
	require.NoError(t, os.Chmod(whsec, 0o640))  //nolint:gosec // the mode under test
	out = serve()
	assert.Contains(t, out, `"msg":"secret file is open to other local users: they can read (or change) the tokens or secrets in it; chmod 600 it","file":"`+tokens+`","mode":"0644"`)
	assert.Contains(t, out, `"file":"`+whsec+`","mode":"0640"`)
	assert.NotContains(t, out, "aaaaaaaaaaaaaaaa1111", "never the token")
	assert.NotContains(t, out, secret, "never the secret")
}

// TestServeWarnsOfOneCallerInTwoSpellings: tokens for alice and ALICE (or
// two spellings of one e-mail address) are one caller, as principals
// compare canonically; serve says so at start, naming the spellings and
// never the tokens. Two tokens for one spelling (a rotation) are not
// warned about.
func TestServeWarnsOfOneCallerInTwoSpellings(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	serve := func(lines string) string {
		t.Helper()
		tokens := filepath.Join(dir, "tokens")
		require.NoError(t, os.WriteFile(tokens, []byte(lines), 0o600))
		out := &syncBuffer{}
		require.NoError(t, runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", filepath.Join(dir, "store"), "--token-file", tokens}, out))
		return out.String()
	}
	const warning = "tokens name one caller in more than one spelling"
	out := serve("alice=aaaaaaaaaaaaaaaa1111\nalice=aaaaaaaaaaaaaaaa2222\nbob=bbbbbbbbbbbbbbbb1111\n")
	assert.NotContains(t, out, warning, "one spelling per caller")

	out = serve("alice=aaaaaaaaaaaaaaaa1111\nALICE=aaaaaaaaaaaaaaaa2222\nann@example.com=cccccccccccccccc1111\nAnn+x@Example.com=cccccccccccccccc2222\nbob=bbbbbbbbbbbbbbbb1111\n")
	assert.Contains(t, out, `"principals":["ALICE","alice"]`)
	assert.Contains(t, out, `"principals":["Ann+x@Example.com","ann@example.com"]`)
	assert.Equal(t, 2, strings.Count(out, warning))
	assert.NotContains(t, out, "aaaaaaaaaaaaaaaa2222", "never the token")
}
