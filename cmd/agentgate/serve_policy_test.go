package main

import (
	"context"
	"io"
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
