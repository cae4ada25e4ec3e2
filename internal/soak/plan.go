package soak

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/mcptool"
)

// Mode is what the soak's client does with a run.
type Mode string

// The modes of a run. Every run plays the same script (see Script): it reads
// a document, then holds a turn with an append (a write) and a read, then a
// turn with a document write and a second append, then finishes.
const (
	// ModeApprove approves both held turns.
	ModeApprove Mode = "approve"
	// ModeEdit decides per call: each append gets a line naming the run, the
	// document write a path and text of its own.
	ModeEdit Mode = "edit"
	// ModeDeny denies both turns; the model goes on and completes.
	ModeDeny Mode = "deny"
	// ModeDenyEnds denies the first turn of a run with denial_ends_run.
	ModeDenyEnds Mode = "deny_ends"
	// ModeMixed approves the first turn, then approves the document write
	// and denies the append of the second.
	ModeMixed Mode = "mixed"
	// ModeCancel cancels the run right after it started, when it waits, or
	// right after its first decision was accepted.
	ModeCancel Mode = "cancel"
	// ModeAuto allows only the read tools: the model's writes are refused
	// as not allowed, and the run completes without approval.
	ModeAuto Mode = "auto"
	// ModeAbandon never decides: the run waits (60 s window) and expires.
	ModeAbandon Mode = "abandon"
	// ModeClient declares the client tool the first held turn calls: the
	// turn is approved, the server runs its append and hands the client
	// call over (WAITING_FOR_TOOL_RESULTS); the soak submits the result.
	ModeClient Mode = "client"
	// ModeClientAbandon declares the client tool and never submits its
	// result: the run waits for it (10 s window) and expires.
	ModeClientAbandon Mode = "client_abandon"
)

// modeWeights is the mix of modes.
var modeWeights = []struct {
	m Mode
	w int
}{
	{ModeApprove, 26}, {ModeEdit, 16}, {ModeDeny, 10}, {ModeDenyEnds, 5}, {ModeMixed, 10},
	{ModeCancel, 16}, {ModeAuto, 14}, {ModeAbandon, 3}, {ModeClient, 12}, {ModeClientAbandon, 2},
}

func pickMode(rng *rand.Rand) Mode {
	total := 0
	for _, x := range modeWeights {
		total += x.w
	}
	n := rng.IntN(total)
	for _, x := range modeWeights {
		if n < x.w {
			return x.m
		}
		n -= x.w
	}
	return ModeApprove
}

// cancelPhase is when a ModeCancel run is cancelled.
type cancelPhase string

const (
	cancelQueued   cancelPhase = "queued"   // right after POST /runs answered
	cancelWaiting  cancelPhase = "waiting"  // instead of deciding
	cancelResuming cancelPhase = "resuming" // right after the decision's 202
)

var cancelPhases = []cancelPhase{cancelQueued, cancelWaiting, cancelResuming}

// The script's call ids and what they do.
const (
	CallRead1   = "toolu_read_0"
	CallAppend1 = "toolu_append_1"
	CallAbout1  = "toolu_about_1"
	CallClient1 = "toolu_client_1"
	CallWrite2  = "toolu_write_2"
	CallAppend2 = "toolu_append_2"
)

// AppendName is the model's name of the recorder's write.
var AppendName = mcptool.ExposedName(ServerName, AppendTool)

// ClientToolName is the client tool the first held turn calls; runs of
// the client modes declare it (a write: it needs approval), other runs do
// not, and the model gets an error result for it.
const ClientToolName = "soak_client_lookup"

// clientTool declares ClientToolName.
var clientTool = client.ClientTool{
	Name: ClientToolName, Description: "Look a value up in the caller's system.", Effect: client.EffectWrite,
	InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`),
}

// Script is the scripted model every run plays.
func Script() []byte {
	turn := func(text string, uses ...map[string]any) map[string]any {
		content := []map[string]any{{"type": "text", "text": text}}
		content = append(content, uses...)
		return map[string]any{"content": content}
	}
	use := func(id, name string, input map[string]any) map[string]any {
		return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}
	}
	s := map[string]any{"turns": []any{
		turn("Let me read the pricing page.", use(CallRead1, "read_document", map[string]any{"path": "pages/pricing.md"})),
		turn("I'll note it in the ledger and read the about page.",
			use(CallAppend1, AppendName, map[string]any{"line": "first"}),
			use(CallAbout1, "read_document", map[string]any{"path": "pages/about.md"}),
			use(CallClient1, ClientToolName, map[string]any{"q": "stock"})),
		turn("Now the soak page and a second ledger line.",
			use(CallWrite2, "write_document", map[string]any{"path": "soak/page.md", "text": "soak page\n"}),
			use(CallAppend2, AppendName, map[string]any{"line": "second"})),
		turn("Done."),
	}}
	b, _ := json.MarshalIndent(s, "", "  ")
	return b
}

// ToolSources is the tool-sources file naming the recorder.
func ToolSources(recorderURL string) []byte {
	b, _ := json.MarshalIndent(map[string]any{"servers": []any{map[string]any{
		"name": ServerName, "url": recorderURL, "timeout_seconds": 10,
	}}}, "", "  ")
	return b
}

// writeFiles writes the script and the tool-sources file into dir.
func writeFiles(dir, recorderURL string) (script, sources string, err error) {
	script = filepath.Join(dir, "script.json")
	sources = filepath.Join(dir, "tool-sources.json")
	if err := os.WriteFile(script, Script(), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(sources, ToolSources(recorderURL), 0o600); err != nil {
		return "", "", err
	}
	return script, sources, nil
}

// startRequest is the POST /runs body of a run of mode m.
func startRequest(m Mode, n int) client.StartRunRequest {
	req := client.StartRunRequest{
		Prompt:             fmt.Sprintf("soak run %d (%s): read the pricing page, note it, update the soak page.", n, m),
		Approvers:          []string{Approver},
		ApprovalTTLSeconds: 3600,
		Metadata:           map[string]string{"soak_mode": string(m)},
	}
	switch m {
	case ModeAuto:
		req.AllowedTools = []string{"read_document"}
	case ModeDenyEnds:
		req.DenialEndsRun = true
	case ModeAbandon:
		req.ApprovalTTLSeconds = 60
	case ModeClient:
		req.ClientTools = []client.ClientTool{clientTool}
	case ModeClientAbandon:
		req.ClientTools = []client.ClientTool{clientTool}
		req.ToolResultsTTLSeconds = 10
	}
	return req
}

// The principals of the soak: Initiator starts runs, Approver decides them.
const (
	Initiator = "alice"
	Approver  = "bob"
)

// decisionFor is the decision mode m makes on the held turn of run id (nil:
// the mode does not decide), with the input it approves per call (the
// edited input for an edit).
func decisionFor(m Mode, runID string, p *client.Pending) (*client.Decision, map[string]json.RawMessage) {
	approved := map[string]json.RawMessage{}
	var held []client.PendingCall
	for _, c := range p.Calls {
		if c.NeedsApproval {
			held = append(held, c)
		}
	}
	approveAll := func() *client.Decision {
		for _, c := range held {
			approved[c.ID] = c.Input
		}
		d := client.ApproveTurn(p.TurnDigest)
		return &d
	}
	switch m {
	case ModeApprove, ModeCancel, ModeClient, ModeClientAbandon:
		return approveAll(), approved
	case ModeDeny, ModeDenyEnds:
		d := client.DenyTurn(p.TurnDigest, "not in this soak")
		return &d, approved
	case ModeMixed:
		if !holds(p, CallWrite2) {
			return approveAll(), approved
		}
		d := client.Decision{TurnDigest: p.TurnDigest}
		for _, c := range held {
			if c.ID == CallWrite2 {
				approved[c.ID] = c.Input
				d.Calls = append(d.Calls, client.CallDecision{CallID: c.ID, Action: client.Approve})
				continue
			}
			d.Calls = append(d.Calls, client.CallDecision{CallID: c.ID, Action: client.Deny, Message: "not this line"})
		}
		return &d, approved
	case ModeEdit:
		d := client.Decision{TurnDigest: p.TurnDigest}
		for _, c := range held {
			var in any
			switch c.Tool {
			case AppendName:
				in = map[string]string{"line": "edited " + runID + " " + p.SuspensionID}
			case "write_document":
				in = map[string]string{"path": EditedPath(runID), "text": EditedText(runID)}
			default:
				approved[c.ID] = c.Input
				d.Calls = append(d.Calls, client.CallDecision{CallID: c.ID, Action: client.Approve})
				continue
			}
			b, _ := json.Marshal(in)
			approved[c.ID] = b
			d.Calls = append(d.Calls, client.CallDecision{CallID: c.ID, Action: client.Edit, Input: b})
		}
		return &d, approved
	}
	return nil, nil
}

func holds(p *client.Pending, callID string) bool {
	for _, c := range p.Calls {
		if c.ID == callID {
			return true
		}
	}
	return false
}

// EditedPath and EditedText are what an edit-mode run's document write is
// edited to: a document of its own, so its effect can be checked.
func EditedPath(runID string) string { return "soak/runs/" + runID + ".md" }

// EditedText is the text of EditedPath.
func EditedText(runID string) string { return "edited by the soak for " + runID + "\n" }
