package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/runs"
)

// Bearer tokens of the CLI tests' principals.
var cliTokens = map[string]string{
	"cli-alice-token-0123456789": "alice",
	"cli-bob-token-0123456789ab": "bob",
	"cli-carol-token-0123456789": "carol",
}

func cliToken(principal string) string {
	if principal == "stranger" {
		return "a-token-this-server-never-issued"
	}
	for tok, p := range cliTokens {
		if p == principal {
			return tok
		}
	}
	panic("no token for " + principal)
}

// cliEnv is a local server (started as `serve` starts it) with the CLI's
// HTTP traffic validated against openapi.yaml.
type cliEnv struct {
	t   *testing.T
	url string
}

func startCLIEnv(t *testing.T) *cliEnv { t.Helper(); return startCLIEnvOn(t, "") }

// startCLIEnvOn starts the server on a store: "" (embedded) or "aws"
// (names and endpoint from the environment).
func startCLIEnvOn(t *testing.T, store string) *cliEnv {
	t.Helper()
	return startCLIEnvWith(t, serveOptions{store: store})
}

// startCLIEnvWith starts the server with o, on a loopback port of its own,
// in a new folder unless o gives one, with cliTokens, mail and log
// discarded, and points the CLI at it.
func startCLIEnvWith(t *testing.T, o serveOptions) *cliEnv {
	t.Helper()
	o.addr, o.tokens, o.mailOut = "127.0.0.1:0", cliTokens, io.Discard
	o.logger = slog.New(slog.DiscardHandler)
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	s, err := startLocal(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	v := apispec.MustValidator(t)
	prev, prevTerm, prevIn := cliHTTPClient, cliIsTerminal, cliStdin
	cliHTTPClient = &http.Client{Transport: v.Transport(t, nil), Timeout: 30 * time.Second}
	cliIsTerminal, cliStdin = func(any) bool { return false }, strings.NewReader("")
	t.Cleanup(func() { cliHTTPClient, cliIsTerminal, cliStdin = prev, prevTerm, prevIn })
	return &cliEnv{t: t, url: s.URL}
}

// cli runs `agentgate args...` as principal ("" = no token flag) and
// returns the exit code, stdout and stderr.
func (e *cliEnv) cli(principal string, args ...string) (int, string, string) {
	e.t.Helper()
	full := append([]string{}, args...)
	if len(full) >= 2 {
		full = append(full, "--endpoint", e.url)
		if principal != "" {
			full = append(full, "--token", cliToken(principal))
		}
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, full, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runJSON runs a command with --json and decodes its run.
func (e *cliEnv) runJSON(principal string, args ...string) *client.Run {
	e.t.Helper()
	code, out, errOut := e.cli(principal, append(args, "--json")...)
	if code != 0 {
		e.t.Fatalf("agentgate %v: exit %d: %s", args, code, errOut)
	}
	var r client.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("agentgate %v: %v: %s", args, err, out)
	}
	return &r
}

// waiting starts a run of the demo script and waits until it needs a
// decision.
func (e *cliEnv) waiting(extra ...string) *client.Run {
	e.t.Helper()
	args := append([]string{"runs", "start", "--prompt", "update the Team price", "--approver", "bob", "--wait"}, extra...)
	r := e.runJSON("alice", args...)
	if r.Status != client.StatusWaiting || r.Pending == nil {
		e.t.Fatalf("run %s is %s, want it waiting", r.ID, r.Status)
	}
	return r
}

func TestCLIRunsAndApprovals(t *testing.T) {
	e := startCLIEnv(t)
	r := e.waiting("--meta", "ticket=OPS-1", "--ttl", "1h")
	digest := r.Pending.TurnDigest
	other := e.runJSON("alice", "runs", "start", "--prompt", "x", "--approver", "bob")
	editFile := filepath.Join(t.TempDir(), "edit.json")
	if err := os.WriteFile(editFile, []byte(`{"path":7}`), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		who       string
		args      []string
		code      int
		out, serr string // substrings of stdout and stderr
	}{
		{"get", "alice", []string{"runs", "get", r.ID}, 0, "WAITING_FOR_APPROVAL", ""},
		{"get json", "bob", []string{"runs", "get", r.ID, "--json"}, 0, `"turn_digest": "` + digest, ""},
		{"get json before the command", "bob", []string{"--json", "runs", "get", r.ID}, 0, `"turn_digest": "` + digest, ""},
		{"get unknown", "alice", []string{"runs", "get", "nope"}, 1, "", "HTTP 404 not_found"},
		{"get forbidden", "carol", []string{"runs", "get", r.ID}, 1, "", "HTTP 403 forbidden"},
		{"get unauthenticated", "stranger", []string{"runs", "get", r.ID}, 1, "", "HTTP 401 unauthorized"},
		{"get no id", "alice", []string{"runs", "get"}, 2, "", "give the run id"},
		{"events", "alice", []string{"runs", "events", r.ID}, 0, "run_started", ""},
		{"events json limit", "alice", []string{"runs", "events", r.ID, "--json", "--limit", "2"}, 0, `"seq": 2`, ""},
		{"events forbidden", "carol", []string{"runs", "events", r.ID}, 1, "", "HTTP 403"},
		{"start without approver", "alice", []string{"runs", "start", "--prompt", "x"}, 2, "", "--approver"},
		{"start unknown tool", "alice", []string{"runs", "start", "--prompt", "x", "--approver", "bob", "--tool", "rm_rf"}, 1, "", "HTTP 422 unprocessable"},
		{"start bad ttl", "alice", []string{"runs", "start", "--prompt", "x", "--approver", "bob", "--ttl", "5s"}, 2, "", "--ttl 5s: want a duration from 1m to 168h"},
		{"show", "bob", []string{"approvals", "show", r.ID}, 0, "+- Team: 12 EUR", ""},
		{"show has the digest", "bob", []string{"approvals", "show", r.ID}, 0, "--digest " + digest, ""},
		{"show forbidden", "carol", []string{"approvals", "show", r.ID}, 1, "", "HTTP 403"},
		{"approve without digest", "bob", []string{"approvals", "approve", r.ID}, 2, "", "give --digest"},
		{"approve stale digest", "bob", []string{"approvals", "approve", r.ID, "--digest", strings.Repeat("0", 64)}, 1, "", "that digest is not the turn held now"},
		{"approve not an approver", "carol", []string{"approvals", "approve", r.ID, "--digest", digest}, 1, "", "HTTP 403"},
		{"decide edit fails schema", "bob", []string{"runs", "decide", r.ID, "--digest", digest, "--call", "toolu_demo_write=edit:@" + editFile}, 1, "", "HTTP 422"},
		{"decide unknown call", "bob", []string{"runs", "decide", r.ID, "--digest", digest, "--call", "nope=approve"}, 1, "", "HTTP 422"},
		{"decide two modes", "bob", []string{"runs", "decide", r.ID, "--digest", digest, "--approve", "--deny"}, 2, "", "exactly one"},
		{"decide bad call spec", "bob", []string{"runs", "decide", r.ID, "--digest", digest, "--call", "x=maybe"}, 2, "", "approve, deny or edit"},
		{"inbox", "bob", []string{"approvals", "list"}, 0, r.ID + "  from alice  write_document", ""},
		{"inbox json", "bob", []string{"approvals", "list", "--json"}, 0, `"turn_digest": "` + digest, ""},
		{"inbox limit", "bob", []string{"approvals", "list", "--limit", "1", "--json"}, 0, `"run_id"`, ""},
		{"inbox of a non-approver", "carol", []string{"approvals", "list"}, 0, "nothing waits for your decision", ""},
		{"inbox unauthenticated", "stranger", []string{"approvals", "list"}, 1, "", "HTTP 401 unauthorized"},
		{"wait for a status", "alice", []string{"runs", "wait", r.ID, "--status", "waiting_for_approval"}, 0, "WAITING_FOR_APPROVAL", ""},
		{"wait bad status", "alice", []string{"runs", "wait", r.ID, "--status", "DONE"}, 2, "", "unknown status"},
		{"unknown verb", "alice", []string{"runs", "frobnicate", "x"}, 2, "", "unknown command"},
		// A file a flag names that cannot be read is a usage error found
		// before any request (exit 2), as one whose JSON does not decode;
		// it was exit 1.
		{"tool-results missing file", "alice", []string{"runs", "tool-results", r.ID, "--results", "nofile.json"}, 2, "", "--results: open nofile.json"},
		{"start missing prompt file", "alice", []string{"runs", "start", "--prompt-file", "nofile.txt", "--approver", "bob"}, 2, "", "--prompt-file: open nofile.txt"},
		{"start missing body file", "alice", []string{"runs", "start", "--body", "nofile.json"}, 2, "", "--body: open nofile.json"},
		{"decide missing decision file", "bob", []string{"runs", "decide", r.ID, "--decision-file", "nofile.json"}, 2, "", "--decision-file: open nofile.json"},
		{"decide missing edit file", "bob", []string{"runs", "decide", r.ID, "--digest", digest, "--call", "toolu_demo_write=edit:@nofile.json"}, 2, "", "--call: open nofile.json"},
		{"cancel", "alice", []string{"runs", "cancel", other.ID}, 0, "CANCELLED", ""},
		{"cancel again", "alice", []string{"runs", "cancel", other.ID}, 1, "", "HTTP 409 conflict"},
		{"show not waiting", "alice", []string{"approvals", "show", other.ID}, 1, "", "nothing waits"},
		{"wait ends otherwise", "alice", []string{"runs", "wait", other.ID, "--status", "COMPLETED"}, 1, "CANCELLED", "the run ended"},
		{"decide per call", "bob", []string{"runs", "decide", r.ID, "--digest", digest, "--call", "toolu_demo_write=deny:keep the old price"}, 0, "decision recorded", ""},
		{"decide again", "bob", []string{"approvals", "deny", r.ID, "--digest", digest, "--message", "no"}, 1, "", "HTTP 409"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, serr := e.cli(tt.who, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(serr, tt.serr) {
				t.Errorf("agentgate %v: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ⊇ %q, stderr ⊇ %q", tt.args, code, tt.code, out, serr, tt.out, tt.serr)
			}
		})
	}
	done := e.runJSON("alice", "runs", "wait", r.ID)
	if done.Status != client.StatusCompleted || done.Decision == nil || done.Decision.Decision.Calls[0].Message != "keep the old price" {
		t.Errorf("after the per-call denial: %+v", done)
	}
}

// TestCLIApproveBindsToTheShownTurn: without --digest on a terminal, the
// turn is shown and the confirmation decides exactly that digest; a "no"
// decides nothing.
func TestCLIApproveBindsToTheShownTurn(t *testing.T) {
	e := startCLIEnv(t)
	cliIsTerminal = func(any) bool { return true }
	t.Setenv("NO_COLOR", "")

	r := e.waiting()
	cliStdin = strings.NewReader("n\n")
	code, out, serr := e.cli("bob", "approvals", "approve", r.ID)
	if code != 1 || !strings.Contains(serr, "nothing decided") || !strings.Contains(out, "[y/N]") {
		t.Fatalf("answer no: exit %d\n%s\n%s", code, out, serr)
	}
	// The turn holds a read and a write: the question counts the write only.
	if !strings.Contains(out, "Approve the 1 call(s) that need approval in run "+r.ID) {
		t.Errorf("the question counts the calls that need approval:\n%s", out)
	}
	if !strings.Contains(out, ansiGreen+"+- Team: 12 EUR") {
		t.Errorf("on a terminal the diff is coloured:\n%q", out)
	}
	if got := e.runJSON("bob", "runs", "get", r.ID); got.Status != client.StatusWaiting {
		t.Fatalf("after no: %s", got.Status)
	}
	cliStdin = strings.NewReader("y\n")
	code, out, serr = e.cli("bob", "approvals", "approve", r.ID)
	if code != 0 || !strings.Contains(out, "approval recorded") {
		t.Fatalf("answer yes: exit %d\n%s\n%s", code, out, serr)
	}
	got := e.runJSON("bob", "runs", "get", r.ID)
	if got.Decision == nil || got.Decision.Decision.TurnDigest != r.Pending.TurnDigest || got.Decision.By != "bob" {
		t.Fatalf("decision %+v, want bob's approval of %s", got.Decision, r.Pending.TurnDigest)
	}
	// Approving again (an answer lost, say) says whose decision was
	// recorded, on the terminal and from the API's 409 alike.
	decided := fmt.Sprintf("(its last turn was decided by bob via api at %s)", got.Decision.At.UTC().Format(runs.InstantLayout))
	cliStdin = strings.NewReader("y\n")
	code, out, serr = e.cli("bob", "approvals", "approve", r.ID)
	if code != 1 || !strings.Contains(serr, "nothing waits for a decision "+decided) {
		t.Errorf("approve again: exit %d\n%s\n%s", code, out, serr)
	}
	code, out, serr = e.cli("bob", "approvals", "approve", r.ID, "--digest", r.Pending.TurnDigest)
	if code != 1 || !strings.Contains(serr, "HTTP 409") || !strings.Contains(serr, decided) {
		t.Errorf("approve again with --digest: exit %d\n%s\n%s", code, out, serr)
	}

	// Not on a terminal: no colour.
	cliIsTerminal = func(any) bool { return false }
	r = e.waiting()
	_, out, _ = e.cli("bob", "approvals", "show", r.ID)
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour off a terminal:\n%q", out)
	}
	code, out, serr = e.cli("bob", "approvals", "deny", r.ID, "--digest", r.Pending.TurnDigest, "--message", "not today", "--json")
	var denied client.Run
	if code != 0 || json.Unmarshal([]byte(out), &denied) != nil || denied.Decision.Decision.Message != "not today" {
		t.Fatalf("deny: exit %d\n%s\n%s", code, out, serr)
	}
}

// TestCLIEnvironment: endpoint and token come from AGENTGATE_ENDPOINT and
// AGENTGATE_TOKEN when no flag is given.
func TestCLIEnvironment(t *testing.T) {
	e := startCLIEnv(t)
	t.Setenv(EnvEndpoint, e.url)
	t.Setenv(EnvToken, cliToken("alice"))
	var out, serr bytes.Buffer
	code := run(context.Background(), []string{"runs", "start", "--prompt", "x", "--approver", "bob", "--json"}, &out, &serr)
	if code != 0 || !strings.Contains(out.String(), `"initiator": "alice"`) {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), serr.String())
	}
	t.Setenv(EnvEndpoint, "")
	code = run(context.Background(), []string{"runs", "get", "x"}, &out, &serr)
	// A usage error found before any request: exit 2 (it was 1).
	if code != 2 || !strings.Contains(serr.String(), EnvEndpoint) {
		t.Fatalf("no endpoint: exit %d, want 2: %s", code, serr.String())
	}
	// --help never prints the token from the environment.
	out.Reset()
	run(context.Background(), []string{"runs", "get", "--help"}, &out, &serr)
	if strings.Contains(out.String(), cliToken("alice")) {
		t.Error("--help printed the token")
	}
}

// TestHeldTurnShowsLiteralArguments: `approvals show` prints a call's
// arguments as the page and the mail do, the characters an encoder escaped
// ("\u003c", "\u0026", "\u00e9") as themselves, each line indented under
// the call; a control character stays visible.
func TestHeldTurnShowsLiteralArguments(t *testing.T) {
	r := &client.Run{ID: "run1", Initiator: "alice", Pending: &client.Pending{
		TurnDigest: "d", Deadline: time.Now().Add(time.Hour),
		Calls: []client.PendingCall{{ID: "c1", Tool: "run_command", NeedsApproval: true,
			Input: json.RawMessage(`{"cmd":"make \u0026\u0026 rm \u003c in \u003e out","who":"caf\u00e9","bell":"\u0007"}`)}},
	}}
	var out strings.Builder
	writeHeldTurn(&out, r, false)
	for _, want := range []string{`"cmd": "make && rm < in > out",`, "\n      \"who\": \"café\",", `"bell": "\u0007"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("approvals show lacks %q:\n%s", want, out.String())
		}
	}
}

// TestHeldTurnSaysWhyCallsRunOrNot: `approvals show` gives the
// description of the allow rule that lets a call run without approval, as
// a held call's rule gives its own, and labels a call that cannot run so,
// with why, never "runs on resume".
func TestHeldTurnSaysWhyCallsRunOrNot(t *testing.T) {
	r := &client.Run{ID: "run1", Initiator: "alice", Pending: &client.Pending{
		TurnDigest: "d", Deadline: time.Now().Add(time.Hour),
		Calls: []client.PendingCall{
			{ID: "c1", Tool: "write_document", NeedsApproval: true, Effect: client.EffectWrite, Rule: "pricing",
				Approval: &client.ApprovalRule{Description: "pricing changes go through finance"}},
			{ID: "c2", Tool: "write_document", Effect: client.EffectWrite, Rule: "drafts", RuleDescription: "drafts are scratch space"},
			{ID: "c3", Tool: "no_such_tool", Rejected: `unknown tool "no_such_tool"`},
		},
	}}
	var out strings.Builder
	writeHeldTurn(&out, r, false)
	text := out.String()
	for _, want := range []string{"why:  pricing changes go through finance", "rule: drafts\n    why:  drafts are scratch space",
		"[3] no_such_tool CANNOT RUN", `cannot run: unknown tool "no_such_tool"`} {
		if !strings.Contains(text, want) {
			t.Errorf("approvals show lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "runs on resume") != 1 {
		t.Errorf("want only the drafts write said to run on resume:\n%s", text)
	}
}

// TestRunsWaitSaysWhenItCannotReachTheServer: `runs wait` against a server
// that is not there retries until --timeout, as before, but says so on
// stderr once rather than staying silent.
func TestRunsWaitSaysWhenItCannotReachTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	_ = l.Close() // nothing listens there now
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"runs", "wait", "r1", "--timeout", "1500ms", "--endpoint", endpoint, "--token", "t"}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, errOut.String())
	}
	if n := strings.Count(errOut.String(), "still waiting, retrying until --timeout"); n != 1 {
		t.Errorf("stderr says it retries %d times, want once:\n%s", n, errOut.String())
	}
	if !strings.Contains(errOut.String(), "deadline exceeded") {
		t.Errorf("stderr does not end with the timeout:\n%s", errOut.String())
	}
}

func TestRetryNotice(t *testing.T) {
	var w bytes.Buffer
	notify := retryNotice(&w)
	for _, err := range []error{nil, errors.New("down\x1b[2J"), errors.New("down"), nil, nil, errors.New("503")} {
		notify(err)
	}
	want := "agentgate: down\\u001b[2J; still waiting, retrying until --timeout\n" +
		"agentgate: the server answers again\n" +
		"agentgate: 503; still waiting, retrying until --timeout\n"
	if w.String() != want {
		t.Errorf("notices:\n%q\nwant\n%q", w.String(), want)
	}
}

// TestRunsStartWaitExitsOneWhenTheRunFails: `runs start --wait` prints the
// run and exits 1 when it ended other than COMPLETED, as `runs wait` does.
func TestRunsStartWaitExitsOneWhenTheRunFails(t *testing.T) {
	script := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(script, []byte(`{"turns":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: t.TempDir(), tokens: cliTokens, mailOut: io.Discard, model: "scripted:" + script,
		logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e := &cliEnv{t: t, url: s.URL}
	code, out, errOut := e.cli("alice", "runs", "start", "--prompt", "x", "--approver", "bob", "--wait")
	if code != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(errOut, "ended FAILED") {
		t.Errorf("exit %d, want 1 with the run printed and the end said:\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// TestHelpExitsZero: -h of every command prints its usage and exits 0, as
// the API commands' --help does.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"serve", "-h"}, {"init", "-h"}, {"demo", "-h"}, {"runs", "start", "--help"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Errorf("agentgate %v: exit %d, want 0\n%s", args, code, errOut.String())
		}
	}
}

// TestConflictingOrInvalidFlagsAreRefused: values the CLI would otherwise
// drop or misread end the command with a message instead, as a usage
// error (exit 2), before any request.
func TestConflictingOrInvalidFlagsAreRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prompt := write("p.txt", "from the file")
	messages := write("m.json", `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`)
	bodyPrompt := write("body-prompt.json", `{"prompt":"from the body"}`)
	bodyMessages := write("body-messages.json", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	bodyApprovers := write("body-approvers.json", `{"prompt":"p","approvers":["carol"],"metadata":{"k":"v"}}`)
	bodyUnknown := write("body-unknown.json", `{"prompt":"p","approvers":["bob"],"colour":"red"}`)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "start", "--prompt", "x", "--prompt-file", prompt, "--approver", "bob"}, "give one of --prompt, --prompt-file or --messages-file"},
		{[]string{"runs", "start", "--prompt", "x", "--messages-file", messages, "--approver", "bob"}, "give one of --prompt, --prompt-file or --messages-file"},
		{[]string{"runs", "start", "--prompt-file", prompt, "--messages-file", messages, "--approver", "bob"}, "give one of --prompt, --prompt-file or --messages-file"},
		{[]string{"runs", "start", "--prompt", "", "--prompt-file", prompt, "--approver", "bob"}, "give one of --prompt, --prompt-file or --messages-file"},
		{[]string{"runs", "start", "--messages-file", write("bad.json", `{"role":"user"}`), "--approver", "bob"}, "--messages-file: json: cannot unmarshal"},
		{[]string{"runs", "start", "--body", bodyPrompt, "--prompt", "", "--approver", "bob"}, "--prompt and --body: the body gives prompt"},
		{[]string{"runs", "start", "--body", bodyPrompt, "--prompt", "y", "--approver", "bob"}, "--prompt and --body: the body gives prompt"},
		{[]string{"runs", "start", "--body", bodyPrompt, "--messages-file", messages, "--approver", "bob"}, "--messages-file and --body: the body gives prompt"},
		{[]string{"runs", "start", "--body", bodyMessages, "--prompt-file", prompt, "--approver", "bob"}, "--prompt-file and --body: the body gives messages"},
		{[]string{"runs", "start", "--body", bodyApprovers, "--approver", "bob"}, "--approver and --body: the body gives approvers"},
		{[]string{"runs", "start", "--body", bodyApprovers, "--meta", "k=w"}, "--meta and --body: the body gives metadata"},
		{[]string{"runs", "start", "--body", bodyUnknown}, `--body: json: unknown field "colour"`},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--webhook-event", "run.completed"}, "--webhook-event needs --webhook-url"},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--required-approvals", "0"}, "--required-approvals 0: want 1 to 20"},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--required-approvals", "21"}, "--required-approvals 21: want 1 to 20"},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--webhook-url", ""}, "--webhook-url is empty: leave it out for no webhooks"},
		{[]string{"runs", "start", "--body", write("body-hook.json", `{"prompt":"p","approvers":["bob"],"webhook_url":"https://h.example/x"}`), "--webhook-url", "https://h.example/y"}, "--webhook-url and --body: the body gives webhook_url"},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--client-tools", write("ct.json", `[{"name":"t","colour":"red"}]`)}, `--client-tools: json: unknown field "colour"`},
		{[]string{"runs", "decide", "r1", "--decision-file", write("d.json", `{"turn_digest":"d","colour":"red"}`)}, `--decision-file: json: unknown field "colour"`},
		{[]string{"runs", "decide", "r1", "--digest", "d", "--call", "c1=edit:@" + write("e.txt", "not json")}, "is not JSON"},
		{[]string{"runs", "tool-results", "r1", "--results", write("r.json", `[{"call_id":"c1","colour":"red"}]`)}, `--results: json: unknown field "colour"`},
		{[]string{"runs", "wait", "r1", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--idempotency-key", "two words"}, `--idempotency-key "two words": give 1 to 255 visible ASCII characters`},
		{[]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--idempotency-key", ""}, `--idempotency-key "": give 1 to 255`},
		{[]string{"approvals", "list", "--limit", "-1"}, "--limit -1"},
		{[]string{"runs", "events", "r1", "--limit", "-1"}, "--limit -1"},
		{[]string{"runs", "events", "r1", "--after", "-3"}, "--after -3"},
	} {
		var out, errOut bytes.Buffer
		args := append(tt.args, "--endpoint", "http://127.0.0.1:1", "--token", "t")
		if code := run(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("agentgate %v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestParseCallDecision: the call id ends at the first "=" an action
// follows, so ids and deny reasons may hold "=".
func TestParseCallDecision(t *testing.T) {
	for _, tt := range []struct {
		spec, id, action, msg string
	}{
		{"c1=approve", "c1", "approve", ""},
		{"c=1=approve", "c=1", "approve", ""},
		{"c1=deny:a=b", "c1", "deny", "a=b"},
		{"k=v=deny:x=deny:y", "k=v", "deny", "x=deny:y"},
	} {
		cd, err := parseCallDecision(tt.spec)
		if err != nil || cd.CallID != tt.id || string(cd.Action) != tt.action || cd.Message != tt.msg {
			t.Errorf("parseCallDecision(%q) = %+v, %v; want id %q action %q message %q", tt.spec, cd, err, tt.id, tt.action, tt.msg)
		}
	}
	for _, bad := range []string{"c1", "=approve", "c1=bless", "c1=approve:x"} {
		if _, err := parseCallDecision(bad); err == nil {
			t.Errorf("parseCallDecision(%q) accepted", bad)
		}
	}
}

// TestCLIVoteTwiceUnderAQuorum: under a quorum of two, a person who
// approves again gets the server's 409 and the CLI's hint that the vote
// stands (the CLI tells it from a stale digest by the server's message).
func TestCLIVoteTwiceUnderAQuorum(t *testing.T) {
	e := startCLIEnv(t)
	body := filepath.Join(t.TempDir(), "start.json")
	if err := os.WriteFile(body, []byte(`{"required_approvals":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.waiting("--approver", "carol", "--body", body)
	digest := r.Pending.TurnDigest
	if code, out, serr := e.cli("bob", "approvals", "approve", r.ID, "--digest", digest); code != 0 {
		t.Fatalf("first vote: exit %d\n%s\n%s", code, out, serr)
	}
	code, out, serr := e.cli("bob", "approvals", "approve", r.ID, "--digest", digest)
	if code != 1 || !strings.Contains(serr, "HTTP 409") || !strings.Contains(serr, "your vote stands") {
		t.Errorf("second vote by the same person: exit %d\nstdout: %s\nstderr: %s", code, out, serr)
	}
	if strings.Contains(serr, "not the turn held now") || strings.Contains(serr, "moved on") {
		t.Errorf("the hint is the stale-digest one:\n%s", serr)
	}
	if got := e.runJSON("alice", "runs", "get", r.ID); got.Status != client.StatusWaiting {
		t.Errorf("after one person's two votes the run is %s, want it still waiting", got.Status)
	}
	// The text of `runs get` shows the vote, as the decide command's 409
	// hint says it does, and the held call's own progress.
	if code, out, serr := e.cli("alice", "runs", "get", r.ID); code != 0 || !strings.Contains(out, "votes      bob") ||
		!strings.Contains(out, "1 more approval(s) needed") || !strings.Contains(out, "votes: 1 approval(s) (bob), 1 more needed") {
		t.Errorf("runs get under a quorum: exit %d\nstdout: %s\nstderr: %s", code, out, serr)
	}
}

// TestInboxVotes: `approvals list` says of a quorum how many approvals are
// still missing (the inbox's votes_missing), and nothing when one decides.
func TestInboxVotes(t *testing.T) {
	for _, tt := range []struct {
		needed, missing int
		want            string
	}{
		{1, 1, ""},
		{2, 2, "  up to 2 more approval(s) per call (each needs up to 2)"},
		{3, 1, "  up to 1 more approval(s) per call (each needs up to 3)"},
		{2, 0, "  needs up to 2 approvals per call"}, // a server before votes_missing
	} {
		if got := inboxVotes(client.PendingApproval{VotesNeeded: tt.needed, VotesMissing: tt.missing}); got != tt.want {
			t.Errorf("needed %d, missing %d: %q, want %q", tt.needed, tt.missing, got, tt.want)
		}
	}
	two := 2
	if got, want := inboxVotes(client.PendingApproval{VotesNeeded: 2, VotesMissing: 1, Approvals: &two}), "  up to 1 more approval(s) per call (each needs up to 2); 2 person(s) approved a call so far"; got != want {
		t.Errorf("with approvals: %q, want %q", got, want)
	}
}

// TestQuorumTextPerCall: where the held calls of a quorum differ in what
// they still need, the CLI's vote line says each call's; the text of a
// decided run names whose votes decided it, call by call.
func TestQuorumTextPerCall(t *testing.T) {
	n := func(v int) *int { return &v }
	needed := 2
	r := &client.Run{ID: "r1", Status: client.StatusWaiting, VotesNeeded: &needed,
		Votes: []client.Vote{{By: "ann", Calls: []client.VoteChoice{{CallID: "toolu_a", Action: client.Approve}}, Via: "api"}},
		Pending: &client.Pending{TurnDigest: strings.Repeat("a", 64), Calls: []client.PendingCall{
			{ID: "toolu_a", Tool: "write_document", NeedsApproval: true, Approval: &client.ApprovalRule{RequiredApprovals: 2, Approvals: n(1), ApprovedBy: []string{"ann"}, StillNeeded: n(1)}},
			{ID: "toolu_b", Tool: "send_mail", NeedsApproval: true, Approval: &client.ApprovalRule{RequiredApprovals: 2, Approvals: n(0), StillNeeded: n(2)}},
		}}}
	if got, want := voteLine(r), "ann per call: toolu_a=approve (api); 1 more approval of write_document and 2 more of send_mail needed"; got != want {
		t.Errorf("voteLine = %q, want %q", got, want)
	}
	r.Votes[0].By, r.Votes[0].Person = "ann-ci", "ann"
	if got, want := voteLine(r), "ann per call: toolu_a=approve (api); 1 more approval of write_document and 2 more of send_mail needed"; got != want {
		t.Errorf("voteLine of a vote cast with another alias = %q, want %q (the person)", got, want)
	}
	var b strings.Builder
	writeRun(&b, r)
	if !strings.Contains(b.String(), "votes: 1 approval(s) (ann), 1 more needed") {
		t.Errorf("runs get does not show who approved the call:\n%s", b.String())
	}

	// A call its votes approved, and one that cannot run, are said so in
	// runs get and approvals show (tester helper-82 F2).
	r.Pending.Calls = append(r.Pending.Calls,
		client.PendingCall{ID: "toolu_c", Tool: "write_document", NeedsApproval: true, Approval: &client.ApprovalRule{RequiredApprovals: 1, Approvals: n(1), ApprovedBy: []string{"dave"}, StillNeeded: n(0)}},
		client.PendingCall{ID: "toolu_d", Tool: "frobnicate", Rejected: `unknown tool "frobnicate"`})
	b.Reset()
	writeRun(&b, r)
	for _, want := range []string{"  - toolu_c write_document (, approved by the votes; votes: approved by dave)",
		`  - toolu_d frobnicate (, cannot run, fails whatever the decision: unknown tool "frobnicate")`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("runs get lacks %q:\n%s", want, b.String())
		}
	}
	r.Voting = true
	r.Pending.Calls = append(r.Pending.Calls, client.PendingCall{ID: "toolu_e", Tool: "write_document", NeedsApproval: true,
		Rejected: "input: path is required", Approval: &client.ApprovalRule{RequiredApprovals: 1, Approvals: n(0), StillNeeded: n(1)}})
	b.Reset()
	writeHeldTurn(&b, r, false)
	if want := "APPROVED by the votes"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "0 more needed") {
		t.Errorf("approvals show lacks %q or says 0 more needed:\n%s", want, b.String())
	}
	if want := "fails as it is: input: path is required (votes under a quorum take no edits)"; !strings.Contains(b.String(), want) {
		t.Errorf("approvals show of a turn a quorum's votes decide offers an edit (tester helper-82 F1), lacks %q:\n%s", want, b.String())
	}
	// Where each held call needs one approval, the voter who decides a
	// call may edit it: approvals show says so.
	quorumCalls := r.Pending.Calls
	r.Pending.Calls = []client.PendingCall{quorumCalls[len(quorumCalls)-1], {ID: "toolu_f", Tool: "send_mail", NeedsApproval: true,
		Approval: &client.ApprovalRule{Approvals: n(0), StillNeeded: n(1)}}}
	b.Reset()
	writeHeldTurn(&b, r, false)
	if want := "fails as it is: input: path is required (an edit with a valid input runs instead)"; !strings.Contains(b.String(), want) {
		t.Errorf("approvals show of a turn decided call by call, one approval each, lacks %q:\n%s", want, b.String())
	}
	r.Pending.Calls = quorumCalls[:len(quorumCalls)-1]

	r.Status, r.Pending, r.VotesNeeded = client.StatusCompleted, nil, nil
	r.Decision = &client.RecordedDecision{By: "carol", Via: "link", At: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC),
		Decision: client.Decision{Calls: []client.CallDecision{{CallID: "toolu_a", Action: client.Approve}, {CallID: "toolu_b", Action: client.Deny}}},
		Deciders: []string{"ann", "bob", "carol"},
		DecidedCalls: []client.DecidedCall{{CallID: "toolu_a", Tool: "write_document", Action: client.Approve, By: []string{"ann", "carol"}},
			{CallID: "toolu_b", Tool: "send_mail", Action: client.Deny, By: []string{"bob"}}}}
	b.Reset()
	writeRun(&b, r)
	for _, want := range []string{"decision   2 per-call decision(s) by the votes of ann, bob, carol; the last, carol's, via link at 2026-12-05T09:00:00Z",
		"  - toolu_a write_document approved by ann, carol", "  - toolu_b send_mail denied by bob"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("runs get of a decided quorum lacks %q:\n%s", want, b.String())
		}
	}

	// Voters named by person, whichever alias they voted with: the last
	// vote, cast as carol@example.com, is carol's (as the deciders say).
	r.Decision.By = "carol@example.com"
	r.Votes = []client.Vote{{By: "ann-ci", Person: "ann", Via: "api"}, {By: "carol@example.com", Person: "carol", Via: "link"}}
	b.Reset()
	writeRun(&b, r)
	if want := "by the votes of ann, bob, carol; the last, carol's, via link"; !strings.Contains(b.String(), want) {
		t.Errorf("runs get lacks %q:\n%s", want, b.String())
	}

	// A call its one approver edited, where each call is decided apart.
	r.Decision.DecidedCalls[0] = client.DecidedCall{CallID: "toolu_a", Tool: "write_document", Action: client.Edit, By: []string{"ann"}}
	b.Reset()
	writeRun(&b, r)
	if want := "  - toolu_a write_document edited and approved by ann"; !strings.Contains(b.String(), want) {
		t.Errorf("runs get lacks %q:\n%s", want, b.String())
	}
}

// TestAFlagWithoutItsValueIsRefused: a flag that takes a value, given last
// without one, is refused as the flag package refuses it, instead of
// taking the positional argument before it as its value.
func TestAFlagWithoutItsValueIsRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "get", "r1", "--endpoint", "http://127.0.0.1:1", "--token"}, "flag needs an argument: --token"},
		{[]string{"runs", "events", "r1", "--endpoint", "http://127.0.0.1:1", "--token", "t", "--limit"}, "flag needs an argument: --limit"},
		{[]string{"approvals", "deny", "r1", "--endpoint", "http://127.0.0.1:1", "--token", "t", "-message"}, "flag needs an argument: -message"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tt.args, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("agentgate %v: exit %d, stderr %q; want %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestUsageErrorsExitTwo: every usage error exits 2 with the message and
// the usage on stderr and nothing on stdout: no command or an unknown
// one, a command group without its subcommand or with an unknown one, a
// missing or extra argument, a flag a command does not have. Help exits 0
// with the usage on stdout. (Group commands without a subcommand, like
// `agentgate runs`, printed the usage and exited 0; the others exited 1.)
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
		msg  string // on stderr, beside the usage
	}{
		{nil, 2, ""},
		{[]string{"nosuch"}, 2, `unknown command "nosuch"`},
		{[]string{"runs"}, 2, "no command given"},
		{[]string{"approvals"}, 2, "no command given"},
		{[]string{"runs", "bogus"}, 2, `unknown command "bogus"`},
		{[]string{"approvals", "bogus"}, 2, `unknown command "bogus"`},
		{[]string{"runs", "get"}, 2, "give the run id"},
		{[]string{"runs", "get", "a", "b"}, 2, "give one run id, not 2 arguments"},
		{[]string{"runs", "cancel"}, 2, "give the run id"},
		{[]string{"approvals", "show"}, 2, "give the run id"},
		{[]string{"approvals", "list", "extra"}, 2, "unexpected arguments"},
		{[]string{"runs", "tool-results", "r1"}, 2, "give --results FILE"},
		{[]string{"runs", "get", "r1", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"runs", "get", "r1", "--json", "--bogus"}, 2, `"message":"flag provided but not defined: -bogus"`},
		{[]string{"approvals", "list", "--limit", "many"}, 2, `invalid value "many" for flag -limit`},
		{[]string{"runs", "get", "r1", "--token"}, 2, "flag needs an argument: --token"},
		{[]string{"serve", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"serve", "extra"}, 2, "unexpected arguments"},
		{[]string{"serve", "--retention", "1ms"}, 2, "--retention 1ms"},
		{[]string{"serve", "--sweep-every", "0"}, 2, "--sweep-every 0s: want a duration from 1s to 24h"},
		{[]string{"serve", "--sweep-every", "-5s"}, 2, "--sweep-every -5s"},
		{[]string{"init", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"demo", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"help"}, 0, ""},
		{[]string{"--help"}, 0, ""},
		{[]string{"runs", "help"}, 0, ""},
		{[]string{"approvals", "--help"}, 0, ""},
		{[]string{"runs", "get", "-h"}, 0, ""},
	} {
		var out, errOut bytes.Buffer
		// No endpoint is given: a usage error is found before any request.
		code := run(context.Background(), tt.args, &out, &errOut)
		switch {
		case code != tt.want:
			t.Errorf("agentgate %v: exit %d, want %d (stdout %q, stderr %q)", tt.args, code, tt.want, out.String(), errOut.String())
		case tt.want == 0 && !strings.Contains(out.String(), "usage: agentgate"):
			t.Errorf("agentgate %v: want the usage on stdout (stdout %q, stderr %q)", tt.args, out.String(), errOut.String())
		case tt.want == 2 && (out.Len() > 0 || !strings.Contains(errOut.String(), tt.msg) ||
			!strings.Contains(strings.ToLower(errOut.String()), "usage") && !strings.Contains(errOut.String(), `"error"`)):
			t.Errorf("agentgate %v: want %q and the usage on stderr, nothing on stdout (stdout %q, stderr %q)", tt.args, tt.msg, out.String(), errOut.String())
		}
	}
}

// TestVersion: `agentgate --version` and `agentgate version` print the
// build's version (a test binary's main module is "devel").
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{arg}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "agentgate ") || strings.TrimSpace(out.String()) == "agentgate" {
			t.Errorf("agentgate %s: exit %d, stdout %q, stderr %q", arg, code, out.String(), errOut.String())
		}
	}
}

// TestDenyUsageShowsTheMessageOptional: deny takes no reason as well as
// one, and its usage says so.
func TestDenyUsageShowsTheMessageOptional(t *testing.T) {
	var out, errOut bytes.Buffer
	run(context.Background(), []string{"approvals", "deny", "--help"}, &out, &errOut)
	if !strings.Contains(out.String(), "[--message WHY]") {
		t.Errorf("deny usage %q, want --message shown optional", out.String())
	}
}

// TestJSONFailuresAreJSON: with --json a failure is one JSON object on
// stderr, with the API's code and status when the API refused, and the
// exit code is unchanged.
func TestJSONFailuresAreJSON(t *testing.T) {
	type failure struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Status  int    `json:"status"`
		} `json:"error"`
	}
	decode := func(t *testing.T, stderr string) failure {
		t.Helper()
		var f failure
		if err := json.Unmarshal([]byte(stderr), &f); err != nil || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("stderr %q is not one JSON object: %v", stderr, err)
		}
		return f
	}
	e := startCLIEnv(t)
	code, _, errOut := e.cli("alice", "runs", "get", "nope", "--json")
	if f := decode(t, errOut); code != 1 || f.Error.Code != "not_found" || f.Error.Status != 404 || !strings.Contains(f.Error.Message, "not found") {
		t.Errorf("unknown run: exit %d, %+v; want exit 1, not_found, 404", code, f.Error)
	}

	t.Setenv(EnvEndpoint, "")
	var out, serr bytes.Buffer
	code = run(context.Background(), []string{"runs", "get", "r1", "--json"}, &out, &serr)
	// No endpoint is a usage error, found before any request: exit 2.
	if f := decode(t, serr.String()); code != 2 || f.Error.Code != "" || f.Error.Status != 0 || !strings.Contains(f.Error.Message, "no endpoint") {
		t.Errorf("no endpoint: exit %d, %+v; want exit 2 and the message alone", code, f.Error)
	}
}

// TestUntilKeepsTheMilliseconds: a deadline is shown as kept, to the
// millisecond, so a closed window never reads as closing before a decision
// accepted in it.
func TestUntilKeepsTheMilliseconds(t *testing.T) {
	passed := time.Date(2026, 12, 5, 5, 24, 41, 989_000_000, time.UTC)
	if got, want := until(passed), "2026-12-05T05:24:41.989Z (passed)"; got != want {
		t.Errorf("until(%v) = %q, want %q", passed, got, want)
	}
	later := time.Date(2999, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	if got, want := until(later), "2999-01-02T02:04:05.000Z (in "; !strings.HasPrefix(got, want) {
		t.Errorf("until(%v) = %q, want it to begin %q", later, got, want)
	}
}

// TestVoteLineWithoutAQuorum: a run whose calls no one person may decide
// together (voting, one approval each) shows its vote line before any
// vote, saying what each call needs; one decided by one decision shows
// none.
func TestVoteLineWithoutAQuorum(t *testing.T) {
	n := func(v int) *int { return &v }
	r := &client.Run{ID: "r1", Status: client.StatusWaiting, VotesNeeded: n(1), Voting: true,
		Pending: &client.Pending{TurnDigest: strings.Repeat("a", 64), Calls: []client.PendingCall{
			{ID: "toolu_a", Tool: "write_document", NeedsApproval: true, Approval: &client.ApprovalRule{Approvals: n(0), StillNeeded: n(1)}},
			{ID: "toolu_b", Tool: "delete_document", NeedsApproval: true, Approval: &client.ApprovalRule{Approvals: n(0), StillNeeded: n(1)}},
		}}}
	// Before any vote: "none yet" (it printed "-").
	if got, want := voteLine(r), "none yet; 1 more approval(s) for each held call needed"; got != want {
		t.Errorf("voteLine = %q, want %q", got, want)
	}
	r.Pending.Calls[0].Approval = &client.ApprovalRule{Approvals: n(1), ApprovedBy: []string{"ann"}, StillNeeded: n(0)}
	r.Votes = []client.Vote{{By: "ann", Action: client.Approve, Via: "api"}}
	if got, want := voteLine(r), "ann approve (api); 1 more approval of delete_document needed"; got != want {
		t.Errorf("voteLine after ann's vote = %q, want %q", got, want)
	}
	r.Voting, r.Votes, r.Pending.Calls[0].Approval, r.Pending.Calls[1].Approval = false, nil, nil, nil
	if got := voteLine(r); got != "" {
		t.Errorf("one decision: voteLine = %q, want none", got)
	}
}
