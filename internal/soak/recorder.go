package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgate/agentgate/internal/mcptool"
)

// The recording MCP server's name in the tool-sources file and its tool.
const (
	// ServerName prefixes the recorder's tools: the model calls
	// "soak__append".
	ServerName = "soak"
	// AppendTool is the recorder's write: not read-only, not idempotent, so
	// every call needs approval and runs under the write fence.
	AppendTool = "append"
)

// Execution is one tools/call the recorder executed.
type Execution struct {
	Seq  int       `json:"seq"`
	At   time.Time `json:"at"`
	Tool string    `json:"tool"`
	// Key is the call's idempotency key, "runID/suspensionID/callID".
	Key  string          `json:"key"`
	Args json.RawMessage `json:"args"`
}

// RunID, SuspensionID and CallID split the idempotency key.
func (e Execution) RunID() string        { return keyPart(e.Key, 0) }
func (e Execution) SuspensionID() string { return keyPart(e.Key, 1) }
func (e Execution) CallID() string       { return keyPart(e.Key, 2) }

func keyPart(key string, i int) string {
	parts := strings.SplitN(key, "/", 3)
	if i < len(parts) {
		return parts[i]
	}
	return ""
}

// Recorder is the MCP server whose tool executions are the observable
// writes of the soak.
type Recorder struct {
	URL string

	// OnCall is told when a call arrived (before it returns); when it
	// returns true, the answer waits until Release is called or 200 ms
	// passed, so a kill can land while the write is in flight.
	OnCall func(e Execution) bool
	// OnReturn is told when a call's handler returns: the write is done
	// and its answer is about to be sent.
	OnReturn func(e Execution)

	mu    sync.Mutex
	execs []Execution
	hold  chan struct{}
	srv   *http.Server
	ln    net.Listener
}

// StartRecorder serves the recording MCP server on a loopback port.
func StartRecorder() (*Recorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("recorder: listen: %w", err)
	}
	r := &Recorder{URL: "http://" + ln.Addr().String() + "/mcp", ln: ln, hold: make(chan struct{}, 1)}
	s := mcp.NewServer(&mcp.Implementation{Name: "agentgate-soak", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        AppendTool,
		Description: "Append one line to the soak's ledger (a write: needs approval).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"line":{"type":"string","maxLength":512}},"required":["line"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: boolPtr(false)},
	}, r.handle)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	r.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func boolPtr(b bool) *bool { return &b }

func (r *Recorder) handle(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	key, _ := req.Params.Meta[mcptool.IdempotencyKeyMeta].(string)
	r.mu.Lock()
	e := Execution{Seq: len(r.execs) + 1, At: time.Now(), Tool: req.Params.Name, Key: key, Args: append(json.RawMessage(nil), req.Params.Arguments...)}
	r.execs = append(r.execs, e)
	r.mu.Unlock()
	if r.OnCall != nil && r.OnCall(e) {
		select {
		case <-r.hold:
		case <-time.After(200 * time.Millisecond):
		}
	}
	if r.OnReturn != nil {
		defer r.OnReturn(e)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("appended (entry %d)", e.Seq)}}}, nil
}

// Release lets a held call answer (after the kill it waited for).
func (r *Recorder) Release() {
	select {
	case r.hold <- struct{}{}:
	default:
	}
}

// Executions returns every execution so far, in order.
func (r *Recorder) Executions() []Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Execution(nil), r.execs...)
}

// Close stops the server.
func (r *Recorder) Close() error { return r.srv.Close() }
