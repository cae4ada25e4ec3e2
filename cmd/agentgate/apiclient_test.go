package main

// The API client of this package's tests (over apitest.Caller, the tests'
// one REST client), the run and event views they read, and test doubles
// shared by the suites.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/loop"
)

// apiClient calls the REST API as one bearer-token caller through the
// tests' one REST client (apitest.Caller), decoding into this package's
// view of a run.
type apiClient struct {
	t     *testing.T
	base  string
	token string
}

func (c *apiClient) caller() *apitest.Caller { return &apitest.Caller{URL: c.base, Token: c.token} }

// do sends body as JSON (nil: none), requires status want and decodes the
// answer into into (nil: ignore it).
func (c *apiClient) do(method, path string, body any, want int, into any) {
	c.t.Helper()
	c.caller().Do(c.t, method, path, body, want, into)
}

// run reads GET /runs/{id}.
func (c *apiClient) run(id string) runJSON {
	c.t.Helper()
	var r runJSON
	c.do(http.MethodGet, "/runs/"+id, nil, http.StatusOK, &r)
	return r
}

// events reads the whole audit trail of run id.
func (c *apiClient) events(id string) []eventJSON {
	c.t.Helper()
	var all []eventJSON
	after := int64(0)
	for range 100 {
		var page struct {
			Events []eventJSON `json:"events"`
			Next   *int64      `json:"next"`
		}
		c.do(http.MethodGet, fmt.Sprintf("/runs/%s/events?after=%d", id, after), nil, http.StatusOK, &page)
		all = append(all, page.Events...)
		if page.Next == nil || len(page.Events) == 0 {
			return all
		}
		after = *page.Next
	}
	c.t.Fatalf("run %s: more than 100 event pages", id)
	return nil
}

// waitStatus polls run id until it has status (a different terminal status
// fails at once) and returns it.
func (c *apiClient) waitStatus(id, status string) runJSON {
	c.t.Helper()
	var r runJSON
	c.caller().WaitStatus(c.t, id, status, &r)
	return r
}

// waitEvent polls the events of run id until one of type typ is there.
func (c *apiClient) waitEvent(id, typ string) eventJSON {
	c.t.Helper()
	var ev eventJSON
	poll(c.t, "event "+typ+" of run "+id, func() bool {
		for _, e := range c.events(id) {
			if e.Type == typ {
				ev = e
				return true
			}
		}
		return false
	})
	return ev
}

// poll calls cond every 20 ms until it is true, failing after linkWait.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(linkWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %s", what, linkWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runJSON is the part of GET /runs/{id} the link tests read.
type runJSON struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Reason  string `json:"termination_reason"`
	Version int64  `json:"version"`
	Pending *struct {
		SuspensionID string    `json:"suspension_id"`
		TurnDigest   string    `json:"turn_digest"`
		Deadline     time.Time `json:"deadline"`
		Calls        []struct {
			ID            string          `json:"id"`
			Tool          string          `json:"tool"`
			Input         json.RawMessage `json:"input"`
			NeedsApproval bool            `json:"needs_approval"`
			Preview       string          `json:"preview"`
		} `json:"calls"`
	} `json:"pending"`
	Decision *struct {
		By       string    `json:"by"`
		Via      string    `json:"via"`
		At       time.Time `json:"at"`
		Decision struct {
			TurnDigest string `json:"turn_digest"`
			Action     string `json:"action"`
			Message    string `json:"message"`
			Calls      []struct {
				CallID  string `json:"call_id"`
				Action  string `json:"action"`
				Message string `json:"message"`
			} `json:"calls"`
		} `json:"decision"`
	} `json:"decision"`
	Output json.RawMessage `json:"output"`
}

// eventJSON is one event of GET /runs/{id}/events.
type eventJSON struct {
	Seq   int64           `json:"seq"`
	Type  string          `json:"type"`
	Actor string          `json:"actor"`
	Data  json.RawMessage `json:"data"`
}

// syncBuffer is a bytes.Buffer safe for the worker goroutines that print
// approval links while the test reads them.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeScript writes a scripted model into dir and returns its path.
func writeScript(t *testing.T, dir, script string) string {
	t.Helper()
	path := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o600))
	return path
}

// recordingModel wraps a model and keeps every request it is sent.
type recordingModel struct {
	model loop.Model
	mu    sync.Mutex
	reqs  []loop.ModelRequest
}

func (m *recordingModel) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.model.Generate(ctx, req)
}

// toolResults returns every tool_result block the model was sent for the
// call id, in the order of the requests.
func (m *recordingModel) toolResults(callID string) []loop.Block {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []loop.Block
	for _, req := range m.reqs {
		for _, msg := range req.Messages {
			for _, b := range msg.Content {
				if b.Type == loop.BlockToolResult && b.ToolUseID == callID {
					out = append(out, b)
				}
			}
		}
	}
	return out
}
