package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/gateway"
	"github.com/agentgate/agentgate/internal/provider/scripted"
)

// TestDemoScriptFinishesHonestlyWhateverIsDecided runs the built-in demo
// script (the model of `demo` and of a default `serve`) once per decision
// on its write: approve, edit to 11 EUR, deny. A scripted model plays the
// same turns whatever is decided, so its last text must not claim the write
// happened (it used to say "Done: ... now reads 12 EUR" after a denial
// too); the page says what the decision made it say.
func TestDemoScriptFinishesHonestlyWhateverIsDecided(t *testing.T) {
	for _, tt := range []struct {
		name     string
		decision map[string]any // without turn_digest
		wantPage string
	}{
		{"approve", map[string]any{"action": "approve"}, "- Team: 12 EUR per user and month"},
		{"edit", map[string]any{"calls": []map[string]any{{"call_id": "toolu_demo_write", "action": "edit", "input": map[string]any{
			"path": "pages/pricing.md", "text": "# Pricing\n\n- Starter: free\n- Team: 11 EUR per user and month\n- Enterprise: ask us\n"}}}}, "- Team: 11 EUR per user and month"},
		{"deny", map[string]any{"action": "deny", "message": "not yet"}, "- Team: 10 EUR per user and month"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			alice, bob := gateway.NewToken(), gateway.NewToken()
			s, err := startLocal(ctx, serveOptions{
				addr: "127.0.0.1:0", dir: dir, tokens: map[string]string{alice: "alice", bob: "bob"},
				mailOut: io.Discard, logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			})
			require.NoError(t, err)
			defer s.Close()
			c := &demoClient{ctx: ctx, base: s.URL, out: io.Discard}
			var run runView
			require.NoError(t, c.do("POST", "/runs", alice, map[string]any{
				"prompt": "Update the pricing page.", "approvers": []string{"bob"},
			}, http.StatusAccepted, &run))
			run, err = c.waitFor(ctx, run.ID, alice, "WAITING_FOR_APPROVAL")
			require.NoError(t, err)
			tt.decision["turn_digest"] = run.Pending.TurnDigest
			require.NoError(t, c.do("POST", "/runs/"+run.ID+"/decision", bob, tt.decision, http.StatusAccepted, &run))
			run, err = c.waitFor(ctx, run.ID, alice, "COMPLETED")
			require.NoError(t, err)

			doc, err := os.ReadFile(filepath.Join(dir, "content", "pages", "pricing.md"))
			require.NoError(t, err)
			assert.Equal(t, tt.wantPage, firstLine(string(doc), "- Team"))
			var out struct{ Text string }
			require.NoError(t, json.Unmarshal(run.Output, &out))
			for _, claim := range []string{"Done", "now reads", "now says", "updated"} {
				assert.NotContains(t, strings.ToLower(out.Text), strings.ToLower(claim), "the final text claims the write: %q", out.Text)
			}
			assert.Contains(t, out.Text, "events", "the final text points to the run's events: %q", out.Text)
		})
	}
}

// TestMCPExampleScriptIsTheREADMEs: README's MCP example runs the scripted
// model shipped in examples/ (it named only scripted:<file>, which nothing
// shipped), and the file parses as one. The integration test
// TestEverythingServerBehindTheGate plays it against the reference server.
func TestMCPExampleScriptIsTheREADMEs(t *testing.T) {
	const path = "examples/mcp-everything-script.json"
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	require.NoError(t, err)
	_, err = scripted.Parse(b)
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(readme), "--model scripted:"+path)
}
