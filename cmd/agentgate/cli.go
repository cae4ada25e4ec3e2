package main

// The API commands (`agentgate runs ...`, `agentgate approvals ...`):
// shared flags, the client, output helpers. Each command group lives in
// its own file (cli_runs.go, cli_approvals.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/runs"
)

// The environment the API commands read.
const (
	EnvEndpoint = "AGENTGATE_ENDPOINT"
	EnvToken    = "AGENTGATE_TOKEN"
)

// Test hooks: the HTTP client of the API commands (nil: the client's
// default), their standard input, and whether their output is a terminal.
// cliStderr is where the API commands say what they retry; run sets it.
var (
	cliHTTPClient *http.Client
	cliStdin      io.Reader = os.Stdin
	cliIsTerminal           = isCharDevice
	cliStderr     io.Writer = os.Stderr
)

// subcommand is one verb of a command group.
type subcommand struct {
	usage   string // arguments, e.g. "ID [flags]"
	summary string
	run     func(ctx context.Context, g *globalFlags, args []string, stdout io.Writer) error
	// flags adds the verb's own flags.
	flags func(fs *flag.FlagSet)
}

// globalFlags are the flags every API command takes.
type globalFlags struct {
	endpoint string
	token    string
	region   string
	json     bool
	fs       *flag.FlagSet
}

func (g *globalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoint, "endpoint", "", "API base URL: the deployed ApiUrl (with the stage) or the local server (env "+EnvEndpoint+")")
	fs.StringVar(&g.token, "token", "", "bearer token of the local server (env "+EnvToken+"); without one, requests are signed with SigV4 from the AWS credential chain")
	fs.StringVar(&g.region, "region", "", "SigV4 signing region (default: from the endpoint's host, else the AWS configuration)")
	fs.BoolVar(&g.json, "json", false, "print JSON instead of text")
	g.fs = fs
}

func (g *globalFlags) client() (*client.Client, error) {
	// The environment is read here, not as flag defaults: --help would
	// print a token default.
	from := "--endpoint"
	if g.endpoint == "" {
		g.endpoint, from = os.Getenv(EnvEndpoint), EnvEndpoint
	}
	if g.token == "" {
		g.token = os.Getenv(EnvToken)
	}
	if g.endpoint == "" {
		return nil, usagef("no endpoint: pass --endpoint or set %s", EnvEndpoint)
	}
	if err := checkEndpoint(g.endpoint, from); err != nil {
		return nil, err
	}
	// A person waiting at a terminal wants a change shown at once: the
	// local server holds each wait request until the run changes (10 s at
	// most); the deployed API answers at once and Wait backs off.
	opts := []client.Option{client.WithServerWait(10 * time.Second), client.WithWaitNotify(retryNotice(cliStderr))}
	if g.token != "" {
		opts = append(opts, client.WithBearerToken(g.token))
	}
	if g.region != "" {
		opts = append(opts, client.WithRegion(g.region))
	}
	if cliHTTPClient != nil {
		opts = append(opts, client.WithHTTPClient(cliHTTPClient))
	}
	c, err := client.New(g.endpoint, opts...)
	if errors.Is(err, client.ErrNoRegion) || errors.Is(err, client.ErrNoCredentials) {
		// The client's message names its Go options; say it in flags.
		return nil, fmt.Errorf("no --token (or %s) for a local server, so requests are signed with SigV4 for the deployed API, which needs --region (or AWS_REGION) and AWS credentials: %w", EnvToken, err)
	}
	return c, err
}

// checkEndpoint refuses, as a usage error (exit 2) before any request, an
// endpoint that is not an http(s) URL with a host and without a query or
// fragment (client.New's rule); from names where it came from.
func checkEndpoint(endpoint, from string) error {
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	switch {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == "":
		return nil
	case err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		return usagef("%s %q: want the API's base URL, without a query or fragment", from, endpoint)
	case !strings.Contains(endpoint, "://"):
		return usagef("%s %q is not an http(s) URL: give the scheme, as in http://%s", from, endpoint, endpoint)
	}
	return usagef("%s %q is not an http(s) URL with a host, such as http://127.0.0.1:8080 or the deployed ApiUrl", from, endpoint)
}

// retryNotice returns the CLI's WithWaitNotify function: a wait that
// cannot reach the server (or gets 429 or 5xx answers) says so on w once
// when that starts, then keeps retrying until --timeout as before, and
// says so again when the server answers again.
func retryNotice(w io.Writer) func(error) {
	failing := false
	return func(err error) {
		switch {
		case err != nil && !failing:
			fmt.Fprintf(w, "agentgate: %s; still waiting, retrying until --timeout\n", terminalText(err.Error()))
		case err == nil && failing:
			fmt.Fprintln(w, "agentgate: the server answers again")
		}
		failing = err != nil
	}
}

// runGroup runs one command group: args[0] names the verb. No verb, an
// unknown one, a flag the verb does not have, and the usage errors of the
// verb itself (usagef) are usageErrors, which carry the usage to print.
func runGroup(ctx context.Context, group string, verbs map[string]subcommand, args []string, stdout io.Writer) error {
	stdout = terminalSafe{stdout}
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		groupUsage(stdout, group, verbs)
		return nil
	}
	var b strings.Builder
	groupUsage(&b, group, verbs)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		// Flags without a verb (`agentgate --json runs` hoists to
		// `runs --json`): the verb is missing, whatever the flags.
		err := error(&usageError{err: fmt.Errorf("no command given"), usage: b.String()})
		var g globalFlags
		fs := flag.NewFlagSet(group, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		g.register(fs)
		if fs.Parse(args) == nil && g.json {
			err = jsonFailure{err}
		}
		return err
	}
	v, ok := verbs[args[0]]
	if !ok {
		return &usageError{err: fmt.Errorf("unknown command %q", args[0]), usage: b.String()}
	}
	fs := flag.NewFlagSet(group+" "+args[0], flag.ContinueOnError)
	// -h prints the usage on stdout; a flag error is returned and its
	// usage printed on stderr, once, by run.
	var help bytes.Buffer
	fs.SetOutput(&help)
	verbUsage := fmt.Sprintf("usage: agentgate %s %s %s\n", group, args[0], v.usage)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n%s\n\nflags:\n", verbUsage, v.summary)
		fs.PrintDefaults()
	}
	var g globalFlags
	g.register(fs)
	if v.flags != nil {
		v.flags(fs)
	}
	ordered, err := interleave(fs, args[1:])
	if err == nil {
		err = fs.Parse(ordered)
		if errors.Is(err, flag.ErrHelp) {
			_, werr := io.Copy(stdout, &help)
			return werr
		}
		if err != nil {
			err = &usageError{err: err}
		}
	} else {
		err = &usageError{err: err}
	}
	if err == nil {
		err = v.run(ctx, &g, fs.Args(), stdout)
	}
	var usageErr *usageError
	if errors.As(err, &usageErr) && usageErr.usage == "" {
		usageErr.usage = verbUsage + fmt.Sprintf("(agentgate %s %s -h lists its flags)\n", group, args[0])
	}
	if err != nil && g.json {
		return jsonFailure{err}
	}
	return err
}

// jsonFailure is the error of a command run with --json: run prints it on
// stderr as one JSON object (writeJSONError).
type jsonFailure struct{ err error }

func (e jsonFailure) Error() string { return e.err.Error() }
func (e jsonFailure) Unwrap() error { return e.err }

// writeJSONError prints err as {"error":{"code","message","status"}}: the
// API's code, message and HTTP status when the error is an API answer
// (client.Error), else the message alone.
func writeJSONError(w io.Writer, err error) {
	type body struct {
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
		Status  int    `json:"status,omitempty"`
	}
	b := body{Message: err.Error()}
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		b = body{Code: apiErr.Code, Message: apiErr.Message, Status: apiErr.StatusCode}
		if b.Code == "" { // an answer of API Gateway or a proxy, not agentgate's
			b.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(apiErr.StatusCode), " ", "_"))
		}
	}
	out, _ := json.Marshal(map[string]body{"error": b})
	fmt.Fprintf(w, "%s\n", out)
}

// interleave moves positional arguments after the flags, so that
// `runs get ID --json` works as well as `runs get --json ID`. A flag that
// takes a value and comes last without one is an error, as for the flag
// package, rather than taking the positional argument before it.
func interleave(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("flag needs an argument: %s", a)
		}
		flags = append(flags, args[i+1])
		i++
	}
	return append(flags, pos...), nil
}

func groupUsage(w io.Writer, group string, verbs map[string]subcommand) {
	fmt.Fprintf(w, "usage: agentgate %s <command> [flags]\n\ncommands:\n", group)
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %s %s\n      %s\n", n, verbs[n].usage, verbs[n].summary)
	}
	fmt.Fprintf(w, "\nEvery command takes --endpoint (%s), --token (%s; else SigV4 from the AWS chain), --region and --json.\n", EnvEndpoint, EnvToken)
}

// runClient is what most run verbs start with: the one run id of args,
// then the API client.
func (g *globalFlags) runClient(args []string) (string, *client.Client, error) {
	id, err := oneID(args)
	if err != nil {
		return "", nil, err
	}
	c, err := g.client()
	return id, c, err
}

// oneID returns the single positional argument, a run id.
func oneID(args []string) (string, error) {
	switch len(args) {
	case 1:
		if args[0] == "" {
			return "", usagef("the run id is empty")
		}
		return args[0], nil
	case 0:
		return "", usagef("give the run id")
	}
	return "", usagef("give one run id, not %d arguments", len(args))
}

func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(w, jsonForTerminal(buf.String()))
	return err
}

// jsonForTerminal escapes, as JSON escapes, the characters encoding/json
// leaves raw that a terminal acts on or reorders: DEL and C1 controls and
// format characters (bidirectional overrides, zero-width characters). The
// JSON decodes to the same values; terminalSafe then has nothing to change.
func jsonForTerminal(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) || r == '\n' || r == '\t' {
			b.WriteRune(r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// isCharDevice reports whether w is a terminal.
func isCharDevice(w any) bool {
	f, ok := unwrapTerminal(w).(*os.File)
	if !ok {
		return false
	}
	// A terminal, not any character device: /dev/null is one too, and a
	// command run from cron or CI with stdin from it must not prompt.
	return term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
}

// useColour: on a terminal, unless NO_COLOR is set.
func useColour(w io.Writer) bool {
	return cliIsTerminal(w) && os.Getenv("NO_COLOR") == ""
}

// ANSI colours of diff lines.
const (
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiCyan  = "\x1b[36m"
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

// writeDiff prints a unified diff, indented, coloured when colour is true.
func writeDiff(w io.Writer, diff, indent string, colour bool) {
	for _, line := range strings.Split(strings.TrimRight(diff, "\n"), "\n") {
		c := ""
		switch {
		case !colour:
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
			c = ansiBold
		case strings.HasPrefix(line, "+"):
			c = ansiGreen
		case strings.HasPrefix(line, "-"):
			c = ansiRed
		case strings.HasPrefix(line, "@@"):
			c = ansiCyan
		}
		if c != "" {
			fmt.Fprint(w, indent)
			paint(w, c)
			fmt.Fprint(w, line)
			paint(w, ansiReset)
			fmt.Fprint(w, "\n")
		} else {
			fmt.Fprintf(w, "%s%s\n", indent, line)
		}
	}
}

// until formats a deadline for people, with the milliseconds it was kept
// to: a window that closed is never shown closing before a decision that
// was accepted in it.
func until(t time.Time) string {
	at := t.UTC().Format(runs.InstantLayout)
	d := time.Until(t).Round(time.Second)
	if d < 0 {
		return at + " (passed)"
	}
	return fmt.Sprintf("%s (in %s)", at, d)
}

// writeRun prints a run for people.
func writeRun(w io.Writer, r *client.Run) {
	fmt.Fprintf(w, "run        %s\n", r.ID)
	status := string(r.Status)
	if r.TerminationReason != "" {
		status += " (" + r.TerminationReason + ")"
	}
	fmt.Fprintf(w, "status     %s\n", status)
	fmt.Fprintf(w, "initiator  %s\n", one(r.Initiator))
	fmt.Fprintf(w, "approvers  %s\n", one(strings.Join(r.Approvers, ", ")))
	fmt.Fprintf(w, "created    %s\n", r.CreatedAt.Format(time.RFC3339))
	c := r.Counters
	fmt.Fprintf(w, "counters   %d iterations, %d model calls, %d tool calls, %d+%d tokens\n", c.Iterations, c.ModelCalls, c.ToolCalls, c.InputTokens, c.OutputTokens)
	if len(r.Metadata) > 0 {
		keys := make([]string, 0, len(r.Metadata))
		for k := range r.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+r.Metadata[k])
		}
		fmt.Fprintf(w, "metadata   %s\n", one(strings.Join(kv, " ")))
	}
	if p := r.Pending; p != nil {
		fmt.Fprintf(w, "pending    %d call(s), digest %s, deadline %s\n", len(p.Calls), p.TurnDigest, until(p.Deadline))
		if line := voteLine(r); line != "" {
			fmt.Fprintf(w, "votes      %s\n", line)
		}
		for _, call := range p.Calls {
			need := "runs on resume without approval"
			switch {
			case call.NeedsApproval && votedOut(call.Approval) != "":
				need = votedOut(call.Approval) + " by the votes"
			case call.NeedsApproval:
				need = "needs approval"
			case call.Denied != "":
				need = "denied by policy, never runs"
			case call.Rejected != "":
				need = "cannot run, fails whatever the decision: " + one(call.Rejected)
			}
			if progress := callProgress(call.Approval); progress != "" {
				need += "; votes: " + progress
			}
			fmt.Fprintf(w, "  - %s %s (%s, %s)\n", one(call.ID), one(call.Tool), call.Effect, need)
			if note := definitionNote(call); note != "" {
				fmt.Fprintf(w, "    note: %s\n", note)
			}
		}
	}
	if tr := r.ToolResults; tr != nil {
		fmt.Fprintf(w, "tool calls %d for you to execute, tool-results id %s, deadline %s\n", len(tr.Calls), tr.ToolResultsID, until(tr.Deadline))
		shortened := false
		for _, call := range tr.Calls {
			var notes []string
			if call.Edited {
				notes = append(notes, "input edited by an approver")
			}
			if call.InputTruncated {
				shortened = true
				notes = append(notes, fmt.Sprintf("shortened: %d bytes in all", call.InputSize))
			}
			note := ""
			if len(notes) > 0 {
				note = " (" + strings.Join(notes, "; ") + ")"
			}
			fmt.Fprintf(w, "  - %s %s %s%s\n", one(call.ID), one(call.Name), one(string(call.Input)), note)
		}
		if shortened {
			fmt.Fprintf(w, "  whole inputs: agentgate runs tool-calls %s\n", r.ID)
		}
	}
	if d := r.Decision; d != nil {
		what := string(d.Decision.Action)
		if what == "" {
			what = fmt.Sprintf("%d per-call decision(s)", len(d.Decision.Calls))
		}
		if len(d.Deciders) == 0 {
			fmt.Fprintf(w, "decision   %s by %s via %s at %s\n", what, one(d.By), d.Via, d.At.Format(time.RFC3339))
		} else {
			// A quorum's: whose votes decided it, and who decided each
			// call, by person, as the server names deciders.
			last := d.By
			if n := len(r.Votes); n > 0 && r.Votes[n-1].By == d.By {
				last = voterName(r.Votes[n-1])
			}
			fmt.Fprintf(w, "decision   %s by the votes of %s; the last, %s's, via %s at %s\n", what,
				one(strings.Join(d.Deciders, ", ")), one(last), d.Via, d.At.Format(time.RFC3339))
			for _, c := range d.DecidedCalls {
				outcome := "approved"
				switch c.Action {
				case client.Deny:
					outcome = "denied"
				case client.Edit:
					outcome = "edited and approved"
				}
				fmt.Fprintf(w, "  - %s %s %s by %s\n", one(c.CallID), one(c.Tool), outcome, one(strings.Join(c.By, ", ")))
			}
		}
	}
	if o := r.Output; o != nil {
		if o.Text != "" {
			fmt.Fprintf(w, "output     %s\n", o.Text)
		}
		if o.Detail != "" {
			fmt.Fprintf(w, "detail     %s\n", o.Detail)
		}
	}
}

// output prints v as JSON with --json, else calls text.
func output(g *globalFlags, w io.Writer, v any, text func()) error {
	if g.json {
		return printJSON(w, v)
	}
	text()
	return nil
}
