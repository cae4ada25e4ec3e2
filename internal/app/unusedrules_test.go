package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/loop"
)

// TestTheUnusedRulesWarningAllowsForClientTools: a policy rule for a
// client tool matches no tool of the process (client tools exist only in
// the runs that declare them); the start-up warning said it was a typo or
// an absent tool source, and now says it may be meant for client tools
// (tester helper-112 P3).
func TestTheUnusedRulesWarningAllowsForClientTools(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"version":1,"rules":[{"id":"stock","tools":["lookup_stock"],"outcome":"allow"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := app.LoadGovernance("", policy)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	noModel := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{}, errors.New("no model in this test")
	})
	local, err := app.OpenLocal(app.LocalOptions{Dir: dir, Model: noModel, Governance: g, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Msg   string   `json:"msg"`
			Rules []string `json:"rules"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "policy rules that match no tool of this process") {
			continue
		}
		if len(rec.Rules) != 1 || rec.Rules[0] != "stock" {
			t.Errorf("rules %v, want [stock]", rec.Rules)
		}
		if !strings.Contains(rec.Msg, "or rules meant for client tools, which exist only in the runs that declare them") {
			t.Errorf("the warning %q does not say the rule may be meant for client tools", rec.Msg)
		}
		return
	}
	t.Fatalf("no warning about the unused rule in the log:\n%s", logs.String())
}
