package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/gateway"
)

func init() {
	commands["demo"] = command{
		summary: "run the whole story locally: start a run, suspend on a write, approve, resume, complete",
		run:     runDemo,
	}
}

func runDemo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dir := fs.String("dir", "", "folder for the store (default: a new temporary folder)")
	verbose := fs.Bool("v", false, "also print the server's JSON log")
	if err := parseFlags(fs, args, false, stdout); err != nil {
		return err
	}
	reset := false
	if *dir == "" {
		d, err := os.MkdirTemp("", "agentgate-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	} else {
		var err error
		if reset, err = resetDemoPage(*dir); err != nil {
			return err
		}
	}
	logOut := io.Discard
	if *verbose {
		logOut = stdout
	}
	alice, bob := gateway.NewToken(), gateway.NewToken()
	s, err := startLocal(ctx, serveOptions{
		addr: "127.0.0.1:0", dir: *dir, tokens: map[string]string{alice: "alice", bob: "bob"},
		mailOut: io.Discard, logger: slog.New(slog.NewJSONHandler(logOut, nil)),
	})
	if err != nil {
		return err
	}
	defer s.Close()
	c := &demoClient{ctx: ctx, base: s.URL, out: stdout}
	step := func(format string, a ...any) { fmt.Fprintf(stdout, "\n==> "+format+"\n", a...) }

	step("agentgate is serving on %s (embedded store in %s, scripted model)", s.URL, *dir)
	if reset {
		fmt.Fprintf(stdout, "    pricing.md was set back to its demo text: a demo run in this folder before had changed it\n")
	}
	step("alice starts a run: update the Team price on the pricing page; approvers: bob and ops@example.com")
	var run runView
	if err := c.do("POST", "/runs", alice, map[string]any{
		"prompt":    "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		"approvers": []string{"bob", "ops@example.com"},
	}, http.StatusAccepted, &run); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    202 Accepted: run %s is %s\n", run.ID, run.Status)

	step("the worker reads (search_documents, read_document run at once), then proposes a write and suspends")
	if run, err = c.waitFor(ctx, run.ID, alice, "WAITING_FOR_APPROVAL"); err != nil {
		return err
	}
	for _, call := range run.Pending.Calls {
		fmt.Fprintf(stdout, "    pending: %s %s (needs approval: %t)\n", call.Tool, compactJSON(call.Input), call.NeedsApproval)
		if call.Preview != "" {
			fmt.Fprintf(stdout, "%s\n", indent(call.Preview, "      "))
		}
	}
	fmt.Fprintf(stdout, "    turn digest %s…, deadline %s\n", run.Pending.TurnDigest[:16], run.Pending.Deadline.Format(time.RFC3339))
	// The worker mails the link after the suspension is stored: the
	// notified event says when it went out.
	switch sent, err := c.waitNotified(ctx, run.ID, alice, run.Pending.SuspensionID); {
	case err != nil:
		return err
	case sent > 0:
		fmt.Fprintf(stdout, "    ops@example.com was mailed an approval link (outbox %s)\n", filepath.Join(*dir, "outbox"))
	default:
		fmt.Fprintf(stdout, "    the approval mail to ops@example.com is not on record\n")
	}
	doc, _ := os.ReadFile(filepath.Join(*dir, "content", "pages", "pricing.md"))
	fmt.Fprintf(stdout, "    nothing was written yet: pricing.md still says %q\n", firstLine(string(doc), "- Team"))

	step("bob approves through the API, naming the turn he reviewed")
	if err := c.do("POST", "/runs/"+run.ID+"/decision", bob, map[string]any{
		"turn_digest": run.Pending.TurnDigest, "action": "approve",
	}, http.StatusAccepted, &run); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    202 Accepted: run is %s, decided by %s via %s\n", run.Status, run.Decision.By, run.Decision.Via)
	var conflict map[string]any
	if err := c.do("POST", "/runs/"+run.ID+"/decision", bob, map[string]any{
		"turn_digest": run.Decision.digest(), "action": "approve",
	}, http.StatusConflict, &conflict); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    a second decision is refused: 409 %v\n", conflict["error"].(map[string]any)["message"])

	step("the resume worker runs the approved write once and the model finishes")
	if run, err = c.waitFor(ctx, run.ID, alice, "COMPLETED"); err != nil {
		return err
	}
	var out struct{ Text string }
	_ = json.Unmarshal(run.Output, &out)
	fmt.Fprintf(stdout, "    %s: %s\n", run.Status, out.Text)
	doc, _ = os.ReadFile(filepath.Join(*dir, "content", "pages", "pricing.md"))
	fmt.Fprintf(stdout, "    pricing.md now says %q\n", firstLine(string(doc), "- Team"))
	fmt.Fprintf(stdout, "    counters: %d model calls, %d tool calls, %d input + %d output tokens\n",
		run.Counters.ModelCalls, run.Counters.ToolCalls, run.Counters.InputTokens, run.Counters.OutputTokens)

	step("the audit trail (GET /runs/%s/events)", run.ID)
	var evs struct {
		Events []struct {
			Seq   int64
			Type  string
			Actor string
		}
	}
	if err := c.do("GET", "/runs/"+run.ID+"/events", alice, nil, http.StatusOK, &evs); err != nil {
		return err
	}
	for _, e := range evs.Events {
		fmt.Fprintf(stdout, "    %2d %-14s %s\n", e.Seq, e.Type, e.Actor)
	}
	fmt.Fprintln(stdout, "\ndemo complete")
	return nil
}

// runView is the part of a run response the demo reads.
type runView struct {
	ID       string
	Status   string
	Version  int64
	Output   json.RawMessage
	Counters struct {
		ModelCalls   int64 `json:"model_calls"`
		ToolCalls    int64 `json:"tool_calls"`
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	}
	Pending *struct {
		SuspensionID string `json:"suspension_id"`
		TurnDigest   string `json:"turn_digest"`
		Deadline     time.Time
		Calls        []struct {
			Tool          string
			Input         json.RawMessage
			NeedsApproval bool `json:"needs_approval"`
			Preview       string
		}
	}
	Decision *decisionView
}

type decisionView struct {
	By, Via  string
	Decision json.RawMessage
}

func (d *decisionView) digest() string {
	var v struct {
		TurnDigest string `json:"turn_digest"`
	}
	_ = json.Unmarshal(d.Decision, &v)
	return v.TurnDigest
}

type demoClient struct {
	// ctx ends the demo's requests (Ctrl-C), a held wait too.
	ctx  context.Context
	base string
	out  io.Writer
}

func (c *demoClient) do(method, path, token string, body any, want int, into any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: got %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return json.Unmarshal(b, into)
}

// waitFor reads run id until its status is status; after the first read
// the server holds each request until the run has changed (wait=10).
func (c *demoClient) waitFor(ctx context.Context, id, token, status string) (runView, error) {
	deadline := time.Now().Add(30 * time.Second)
	path := "/runs/" + id
	for {
		var r runView
		if err := c.do("GET", path, token, nil, http.StatusOK, &r); err != nil {
			return r, err
		}
		if r.Status == status {
			return r, nil
		}
		if strings.Contains("COMPLETED FAILED CANCELLED EXPIRED", r.Status) {
			return r, fmt.Errorf("run %s ended %s while waiting for %s: %s", id, r.Status, status, r.Output)
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("run %s still %s after 30s", id, r.Status)
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		path = fmt.Sprintf("/runs/%s?after_version=%d&wait=10", id, r.Version)
	}
}

// waitNotified reads the run's events until the notified event of the
// suspension is there (at most 10 s) and returns how many mails it says
// were sent (0 when there is none).
func (c *demoClient) waitNotified(ctx context.Context, id, token, suspension string) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var page struct {
			Events []struct {
				Type string
				Data struct {
					SuspensionID string `json:"suspension_id"`
					Sent         int
				}
			}
		}
		if err := c.do("GET", "/runs/"+id+"/events?limit=1000", token, nil, http.StatusOK, &page); err != nil {
			return 0, err
		}
		for _, e := range page.Events {
			if e.Type == "notified" && e.Data.SuspensionID == suspension {
				return e.Data.Sent, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix)
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, prefix); i >= 0 {
			return strings.TrimSpace(l[i:])
		}
	}
	return ""
}

// resetDemoPage sets the pricing page of a demo folder used before (dir
// given, its store kept) back to its demo text, so that the demo's story
// (the page still says 10 EUR until bob approves) holds on every run: the
// store seeds the demo pages only into a new folder. It reports whether it
// changed the page; a folder without the page is left as it is.
func resetDemoPage(dir string) (bool, error) {
	const page = "pages/pricing.md"
	path := filepath.Join(dir, "content", filepath.FromSlash(page))
	b, err := os.ReadFile(path) //nolint:gosec // the demo's own folder
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case string(b) == demoDocuments[page]:
		return false, nil
	}
	return true, os.WriteFile(path, []byte(demoDocuments[page]), 0o600)
}
