package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/providertest"
)

// TestAToolInputWithAMemberTwiceNeverRuns: each provider's recorded turn,
// its write's input given "path" a second time on the wire. Anthropic's
// input and OpenAI's arguments reach the loop as written, and the loop
// refuses the call (not held: the run completes, the model told why);
// Bedrock's SDK decodes a tool input into a map, so the loop gets one
// reading of it, the last, which is then what everyone sees.
func TestAToolInputWithAMemberTwiceNeverRuns(t *testing.T) {
	ctx := context.Background()
	twice := map[string][2]string{
		"anthropic": {`"input":{"path":"notes.txt","content":"Hello!"}`, `"input":{"path":"notes.txt","content":"Hello!","path":"/etc/motd"}`},
		"openai":    {`\"content\":\"Hello!\"}"`, `\"content\":\"Hello!\",\"path\":\"/etc/motd\"}"`},
		"bedrock":   {`"input":{"content":"Hello!","path":"notes.txt"}`, `"input":{"content":"Hello!","path":"notes.txt","path":"/etc/motd"}`},
	}
	for _, pc := range providerCases() {
		t.Run(pc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", pc.toolTurn))
			require.NoError(t, err)
			from, to := twice[pc.name][0], twice[pc.name][1]
			require.Equal(t, 1, strings.Count(string(b), from), "the fixture holds the write's input once")
			final, err := os.ReadFile(filepath.Join("testdata", pc.final))
			require.NoError(t, err)
			srv := providertest.NewServer(t, providertest.Reply{Body: strings.Replace(string(b), from, to, 1)}, providertest.Reply{Body: string(final)})
			m, err := New(ctx, pc.spec, pc.deps(srv))
			require.NoError(t, err)
			out, err := (&loop.Runner{Model: m, Tools: testTools(t)}).Run(ctx, startRequest())
			require.NoError(t, err)
			if pc.name == "bedrock" {
				require.Equal(t, loop.OutcomeSuspended, out.Kind)
				held := out.Suspended.PendingCalls[1]
				assert.JSONEq(t, `{"content":"Hello!","path":"/etc/motd"}`, string(held.Input), "one reading, held as any write")
				require.NoError(t, loop.CheckInputForm(held.Name, held.Input))
				return
			}
			require.Equal(t, loop.OutcomeFinished, out.Kind, "the write is not held")
			assert.Equal(t, loop.ReasonCompleted, out.Reason, out.Detail)
			body := srv.LastBody()
			assert.Contains(t, string(body), `the input of tool \"write_file\" is not valid: member \"path\" appears twice in the same object`, "the model is told why")
			assert.NotContains(t, string(body), "read-only", "the write never ran")
		})
	}
}
