package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// needsApprovalOracle is the approval rule restated independently of the loop
// for the tools of testTools.
func needsApprovalOracle(name string, input json.RawMessage) bool {
	switch name {
	case "write_doc", "delete_doc", "flagged_read":
		return true
	case "guarded_read":
		var in struct{ Path string }
		_ = json.Unmarshal(input, &in)
		return strings.HasPrefix(in.Path, "/secret")
	}
	return false
}

func randomCall(rng *rand.Rand, id string) loop.Block {
	switch rng.IntN(7) {
	case 0:
		return use(id, "read_doc", fmt.Sprintf(`{"path":"p%d"}`, rng.IntN(5)))
	case 1:
		return use(id, "write_doc", fmt.Sprintf(`{"path":"p%d","text":"v%d"}`, rng.IntN(5), rng.IntN(100)))
	case 2:
		return use(id, "delete_doc", fmt.Sprintf(`{"path":"p%d"}`, rng.IntN(5)))
	case 3:
		return use(id, "flagged_read", `{"path":"x"}`)
	case 4:
		if rng.IntN(2) == 0 {
			return use(id, "guarded_read", `{"path":"/secret/k"}`)
		}
		return use(id, "guarded_read", `{"path":"/public/k"}`)
	case 5:
		return use(id, "no_such_tool", `{}`)
	default:
		return use(id, "read_doc", `{"path":""}`) // invalid input
	}
}

func randomDecision(rng *rand.Rand, st *loop.SuspendedState) (loop.Decision, map[string]bool) {
	approved := map[string]bool{}
	switch rng.IntN(3) {
	case 0:
		for _, c := range st.PendingCalls {
			approved[c.ID] = true
		}
		return loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove}, approved
	case 1:
		return loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionDeny, Message: "no"}, approved
	}
	d := loop.Decision{TurnDigest: st.TurnDigest}
	for _, c := range st.PendingCalls {
		if !c.NeedsApproval && rng.IntN(2) == 0 {
			approved[c.ID] = true // left out: runs
			continue
		}
		switch rng.IntN(3) {
		case 0:
			d.Calls = append(d.Calls, loop.CallDecision{CallID: c.ID, Action: loop.ActionApprove})
			approved[c.ID] = true
		case 1:
			d.Calls = append(d.Calls, loop.CallDecision{CallID: c.ID, Action: loop.ActionDeny, Message: "no"})
		default:
			if c.Name == "write_doc" {
				d.Calls = append(d.Calls, loop.CallDecision{CallID: c.ID, Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"edited","text":"e"}`)})
			} else {
				d.Calls = append(d.Calls, loop.CallDecision{CallID: c.ID, Action: loop.ActionApprove})
			}
			approved[c.ID] = true
		}
	}
	return d, approved
}

// TestPropertyNoUnapprovedExecution drives random scripts with random
// decisions: an approval-bound call never runs without an approving decision
// for it, and every tool_use has exactly one tool_result.
func TestPropertyNoUnapprovedExecution(t *testing.T) {
	const seeds = 300
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		var turns []loop.Message
		inputs := map[string]json.RawMessage{}
		names := map[string]string{}
		for i := range rng.IntN(6) + 1 {
			var blocks []loop.Block
			for j := range rng.IntN(4) + 1 {
				b := randomCall(rng, fmt.Sprintf("t%dc%d", i, j))
				inputs[b.ID], names[b.ID] = b.Input, b.Name
				blocks = append(blocks, b)
			}
			turns = append(turns, asst(blocks...))
		}
		turns = append(turns, asst(say("done")))

		log := &execLog{}
		r := newRunner(t, scriptModel(turns...), log)
		req := request("go")
		req.Options.MaxIterations = 50
		out, err := r.Run(context.Background(), req)
		require.NoError(t, err, "seed %d", seed)
		approved := map[string]bool{}
		for out.Kind == loop.OutcomeSuspended {
			// Round-trip the state through JSON as a real suspension would.
			raw, err := out.Suspended.Encode()
			require.NoError(t, err)
			st, err := loop.DecodeState(raw)
			require.NoError(t, err)
			d, ok := randomDecision(rng, st)
			for id := range ok {
				approved[id] = true
			}
			out, err = r.Resume(context.Background(), st, d)
			require.NoError(t, err, "seed %d", seed)
		}
		require.Equal(t, loop.ReasonCompleted, out.Reason, "seed %d", seed)
		checkTranscript(t, out.Transcript)
		for _, key := range log.keys {
			id := key[strings.LastIndex(key, "/")+1:]
			if needsApprovalOracle(names[id], inputs[id]) && !approved[id] {
				t.Fatalf("seed %d: call %s (%s) ran without an approving decision", seed, id, names[id])
			}
		}
		seen := map[string]bool{}
		for _, key := range log.keys {
			require.False(t, seen[key], "seed %d: %s executed twice", seed, key)
			seen[key] = true
		}
	}
}
