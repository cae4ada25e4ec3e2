package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesABrokenPolicy: serve --policy with a CEL error does not
// start, and says which rule is broken.
func TestServeRefusesABrokenPolicy(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(p, []byte(`{"version":1,"rules":[{"id":"prod-guard","tools":["*"],"when":"args.path.startsWith('prod/') &&","outcome":"deny"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--dir", filepath.Join(dir, "store"), "--policy", p}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `rules[0] "prod-guard": when:`) {
		t.Fatalf("serve --policy with a CEL error: %v, want an error naming the rule", err)
	}
}

// TestServeReadsItsFilesBeforeTheBusyPort: a broken --policy, --directory,
// scripted --model or --tools file is reported as such even when the
// port is taken: the files are read before the port is.
func TestServeReadsItsFilesBeforeTheBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"policy", []string{"--policy", write("policy.json", `{"version":1,"rules":[{"id":"prod-guard","tools":["*"],"outcome":"deny","extra":1}]}`)}, `rules[0] "prod-guard": json: unknown field "extra"`},
		{"directory", []string{"--directory", write("directory.json", `{"version":2,"persons":[]}`)}, "version: got 2"},
		{"model", []string{"--model", "scripted:" + filepath.Join(dir, "no-such-script.json")}, "no-such-script.json"},
		// The tools file too (tester helper-109 P3-5); its servers are
		// connected to after.
		{"tools missing", []string{"--tools", filepath.Join(dir, "no-such-tools.json")}, "no-such-tools.json"},
		{"tools malformed", []string{"--tools", write("tools.json", `{"servers":[{"name":"docs","url":"http://127.0.0.1:1/mcp","extra":1}]}`)}, `unknown field "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--addr", busy.Addr().String(), "--dir", filepath.Join(dir, "store")}, tt.args...)
			err := runServe(context.Background(), args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve %v on a busy port: %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestServeModelErrorsNameTheFlag: a bad serve --model is told as the
// flag's, not as AGENTGATE_MODEL's, which serve does not read (tester
// helper-109 P3-6).
func TestServeModelErrorsNameTheFlag(t *testing.T) {
	t.Setenv("AGENTGATE_MODEL", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("AGENTGATE_OPENAI_API_KEY_SECRET", "")
	t.Setenv("AGENTGATE_OPENAI_BASE_URL", "")
	for spec, want := range map[string]string{
		"nope:x":   `--model: model spec "nope:x": unknown provider "nope"`,
		"openai:x": `--model: model "openai:x" needs OPENAI_API_KEY`,
	} {
		_, err := serveModel(context.Background(), spec, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "AGENTGATE_MODEL") {
			t.Errorf("serveModel(%q) = %v, want an error starting %q, not naming AGENTGATE_MODEL", spec, err, want)
		}
	}
}
