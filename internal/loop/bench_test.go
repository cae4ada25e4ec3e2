package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// BenchmarkLoopIteration measures the loop's own overhead per iteration (one
// model turn with one read call and its result) with a scripted model and 10
// tools. Reported as ns/iteration beside the usual ns/op (one 10-iteration run).
func BenchmarkLoopIteration(b *testing.B) {
	const iterations = 10
	var tools []loop.Tool
	for i := range 10 {
		tools = append(tools, &loop.FuncTool{
			Def: loop.Definition{Name: fmt.Sprintf("tool_%d", i), Description: "a tool", Effect: loop.EffectRead,
				InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
			CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) { return loop.Result{Content: "ok"}, nil },
		})
	}
	tb, err := loop.NewToolbox(tools...)
	if err != nil {
		b.Fatal(err)
	}
	turns := make([]loop.Message, 0, iterations+1)
	for i := range iterations {
		turns = append(turns, asst(use(fmt.Sprintf("c%d", i), fmt.Sprintf("tool_%d", i%10), `{"q":"x"}`)))
	}
	turns = append(turns, asst(say("done")))
	r := &loop.Runner{Model: scriptModel(turns...), Tools: tb}
	req := request("go")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, err := r.Run(context.Background(), req)
		if err != nil || out.Reason != loop.ReasonCompleted {
			b.Fatalf("run: %v %s", err, out.Reason)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(iterations+1), "ns/iteration")
}

// stateOfSize builds a suspended state whose transcript holds about size bytes
// of word-like text (compressible like real prose, not like zeros).
func stateOfSize(size int) *loop.SuspendedState {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the agent reads a page then proposes a write to the document store and waits for approval " +
		"before it changes anything in the knowledge base tool call result error denied approved edited")
	var msgs []loop.Message
	total := 0
	for i := 0; total < size; i++ {
		var sb strings.Builder
		for sb.Len() < 2000 {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
			if rng.IntN(40) == 0 {
				fmt.Fprintf(&sb, "%d ", rng.IntN(1_000_000))
			}
		}
		role := loop.RoleUser
		if i%2 == 1 {
			role = loop.RoleAssistant
		}
		msgs = append(msgs, loop.Message{Role: role, Content: []loop.Block{loop.TextBlock(sb.String())}})
		total += sb.Len()
	}
	calls := []loop.PendingCall{{ID: "w1", Name: "write_doc", Input: json.RawMessage(`{"path":"a","text":"b"}`), NeedsApproval: true, Effect: loop.EffectWrite}}
	digest, _ := loop.TurnDigest("r", "s", calls)
	return &loop.SuspendedState{SchemaVersion: loop.SchemaVersion, RunID: "r", SuspensionID: "s",
		Transcript: loop.Transcript{Messages: msgs}, PendingCalls: calls, TurnDigest: digest,
		ToolHashes: map[string]string{"write_doc": strings.Repeat("a", 64)}}
}

// BenchmarkStateEncodeGzip measures what a suspension does to its state
// before the S3 put — SuspendedState JSON encode, then runs.EncodeBlob
// (gzip + SHA-256) — for transcripts of 10 KB, 100 KB and 1 MB, reporting
// the compressed size.
func BenchmarkStateEncodeGzip(b *testing.B) {
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		st := stateOfSize(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				raw, err := st.Encode()
				if err != nil {
					b.Fatal(err)
				}
				_, gz, err := runs.EncodeBlob(st.RunID, raw)
				if err != nil {
					b.Fatal(err)
				}
				n = len(gz)
			}
			b.ReportMetric(float64(n), "gzip-bytes")
		})
	}
}
