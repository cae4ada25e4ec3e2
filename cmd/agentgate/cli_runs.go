package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

func init() {
	commands["runs"] = command{
		summary: "start, inspect, wait for, decide, answer (client tools) and cancel runs through the API",
		run: func(ctx context.Context, args []string, stdout io.Writer) error {
			return runGroup(ctx, "runs", runsVerbs(), args, stdout)
		},
	}
}

// runsVerbs are the verbs of `agentgate runs`. Flag values live in the
// closures, one set per invocation.
func runsVerbs() map[string]subcommand {
	var (
		start    startFlags
		after    int64
		limit    int
		statuses listFlag
		timeout  time.Duration
		dec      decideFlags
	)
	return map[string]subcommand{
		"start": {
			usage: "--prompt TEXT --approver WHO...", summary: "start a run (prints it QUEUED; --wait waits until it needs a decision or tool results, or ends)",
			flags: start.register,
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				if len(args) > 0 {
					return usagef("unexpected arguments %q", args)
				}
				if err := checkTimeout(start.timeout); err != nil {
					return err // before the run is started
				}
				var opts []client.StartOption
				if start.given("idempotency-key") {
					if !runs.ValidIdempotencyKey(start.idempotencyKey) {
						return usagef("--idempotency-key %q: give 1 to %d visible ASCII characters ('!' to '~', no spaces), such as a UUID", start.idempotencyKey, runs.MaxIdempotencyKeyBytes)
					}
					opts = append(opts, client.WithIdempotencyKey(start.idempotencyKey))
				}
				req, err := start.request()
				if err != nil {
					return err
				}
				c, err := g.client()
				if err != nil {
					return err
				}
				r, err := c.StartRun(ctx, req, opts...)
				if err != nil {
					return err
				}
				if start.wait {
					if r, err = waitFor(ctx, c, r.ID, start.timeout, []client.Status{client.StatusWaiting, client.StatusWaitingForToolResults}); err != nil && !errors.Is(err, client.ErrRunEnded) {
						return err
					}
				}
				if err := output(g, w, r, func() { writeRun(w, r) }); err != nil {
					return err
				}
				if start.wait && r.Status.Terminal() && r.Status != client.StatusCompleted {
					// A script tells a run that failed (or was cancelled or
					// expired) from one that waits or completed by the exit
					// code; runs wait does so with --status COMPLETED.
					return fmt.Errorf("run %s ended %s (%s)", r.ID, r.Status, one(r.TerminationReason))
				}
				return nil
			},
		},
		"get": {
			usage: "ID", summary: "show a run",
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				id, c, err := g.runClient(args)
				if err != nil {
					return err
				}
				r, err := c.Run(ctx, id)
				if err != nil {
					return err
				}
				return output(g, w, r, func() { writeRun(w, r) })
			},
		},
		"events": {
			usage: "ID [--after N] [--limit N]", summary: "print a run's audit trail (every page)",
			flags: func(fs *flag.FlagSet) {
				fs.Int64Var(&after, "after", 0, "only events after this sequence number")
				fs.IntVar(&limit, "limit", 0, "print at most this many events (0: all)")
			},
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				switch {
				case after < 0:
					return usagef("--after %d: give 0 (from the start) or more", after)
				case limit < 0:
					return usagef("--limit %d: give 0 (all) or more", limit)
				}
				id, c, err := g.runClient(args)
				if err != nil {
					return err
				}
				evs := []client.Event{}
				for ev, err := range c.Events(ctx, id, after) {
					if err != nil {
						return err
					}
					evs = append(evs, ev)
					if limit > 0 && len(evs) == limit {
						break
					}
				}
				return output(g, w, evs, func() {
					for _, ev := range evs {
						fmt.Fprintf(w, "%4d  %s  %-14s %s\n", ev.Seq, ev.At.Format(time.RFC3339), ev.Type, one(ev.Actor))
					}
				})
			},
		},
		"wait": {
			usage: "ID [--status S]... [--timeout D]", summary: "wait until the run reaches a status (default: any terminal one); exit 1 if it ends otherwise",
			flags: func(fs *flag.FlagSet) {
				fs.Var(&statuses, "status", "a status to wait for, e.g. WAITING_FOR_APPROVAL (repeatable)")
				fs.DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long (0: wait without a limit)")
			},
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				id, err := oneID(args)
				if err != nil {
					return err
				}
				if err := checkTimeout(timeout); err != nil {
					return err
				}
				want, err := parseStatuses(statuses)
				if err != nil {
					return err
				}
				c, err := g.client()
				if err != nil {
					return err
				}
				r, err := waitFor(ctx, c, id, timeout, want)
				if r != nil {
					if perr := output(g, w, r, func() { writeRun(w, r) }); perr != nil {
						return perr
					}
				}
				return err
			},
		},
		"decide": {
			usage: "ID --digest D (--approve | --deny | --call ID=ACTION...)", summary: "decide the held turn you reviewed (the digest binds the decision to it)",
			flags: dec.register,
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				id, err := oneID(args)
				if err != nil {
					return err
				}
				d, err := dec.decision()
				if err != nil {
					return err
				}
				c, err := g.client()
				if err != nil {
					return err
				}
				r, err := c.Decide(ctx, id, d)
				if err != nil {
					return explainDecideError(id, err)
				}
				return output(g, w, r, func() { fmt.Fprintf(w, "decision recorded; run %s is %s\n", r.ID, r.Status) })
			},
		},
		"tool-results": toolResultsVerb(),
		"tool-calls":   toolCallsVerb(),
		"cancel": {
			usage: "ID", summary: "cancel a run",
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				id, c, err := g.runClient(args)
				if err != nil {
					return err
				}
				r, err := c.Cancel(ctx, id)
				if err != nil {
					return err
				}
				return output(g, w, r, func() { fmt.Fprintf(w, "run %s is %s\n", r.ID, r.Status) })
			},
		},
	}
}

// checkTimeout refuses a negative --timeout, a usage error.
func checkTimeout(timeout time.Duration) error {
	if timeout < 0 {
		return usagef("--timeout %s: give a duration of 0 (no limit) or more", timeout)
	}
	return nil
}

// waitFor is client.Wait bounded by timeout.
func waitFor(ctx context.Context, c *client.Client, id string, timeout time.Duration, want []client.Status) (*client.Run, error) {
	if err := checkTimeout(timeout); err != nil {
		return nil, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return c.Wait(ctx, id, want...)
}

func parseStatuses(in []string) ([]client.Status, error) {
	known := []client.Status{client.StatusQueued, client.StatusRunning, client.StatusWaiting, client.StatusResuming,
		client.StatusCompleted, client.StatusFailed, client.StatusCancelled, client.StatusExpired, client.StatusWaitingForToolResults}
	var out []client.Status
	for _, s := range in {
		st := client.Status(strings.ToUpper(s))
		ok := false
		for _, k := range known {
			ok = ok || k == st
		}
		if !ok {
			return nil, usagef("unknown status %q", s)
		}
		out = append(out, st)
	}
	return out, nil
}

// explainDecideError adds what to do to a refused decision.
func explainDecideError(id string, err error) error {
	if client.ErrorCode(err) != client.CodeConflict {
		return err
	}
	var e *client.Error
	msg := ""
	if errors.As(err, &e) {
		msg = e.Message
	}
	switch {
	case strings.Contains(msg, "already voted"):
		return fmt.Errorf("%w\nyour vote stands; the run resumes once enough others have voted (`agentgate runs get %s` shows the votes)", err, id)
	case strings.Contains(msg, "does not match the turn"),
		strings.Contains(msg, "the turn you reviewed"), strings.Contains(msg, "decision names"): // the latter two: servers before the wording changed
		return fmt.Errorf("%w\nthat digest is not the turn held now (mistyped, or the run moved on): look again with `agentgate approvals show %s`", err, id)
	}
	return fmt.Errorf("%w\nthe run moved on or was decided since you reviewed it: look again with `agentgate approvals show %s`", err, id)
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// startFlags are the flags of `runs start`.
type startFlags struct {
	prompt, promptFile, messagesFile, body string
	system, model                          string
	approvers, tools, meta, executors      listFlag
	clientTools                            string
	ttl, toolResultsTTL                    time.Duration
	maxIterations, maxOutputTokens         int
	maxTokens                              int64
	denialEndsRun, fourEyes, wait          bool
	timeout                                time.Duration
	idempotencyKey                         string
	webhookURL                             string
	webhookEvents                          listFlag
	requiredApprovals                      int
	requireApproval                        listFlag
	fs                                     *flag.FlagSet // to tell a flag given as 0 from one not given
}

func (s *startFlags) register(fs *flag.FlagSet) {
	s.fs = fs
	fs.StringVar(&s.prompt, "prompt", "", "the request")
	fs.StringVar(&s.promptFile, "prompt-file", "", "read the request from a file (- for standard input)")
	fs.StringVar(&s.messagesFile, "messages-file", "", "an opening conversation: a JSON array of messages")
	fs.StringVar(&s.body, "body", "", "the whole POST /runs body from a JSON file (- for standard input); other flags add the fields it leaves out (a flag for a field it gives is refused)")
	fs.StringVar(&s.system, "system", "", "the system text")
	fs.StringVar(&s.model, "model", "", "a model id the deployment allows")
	fs.Var(&s.approvers, "approver", "who may decide: an e-mail address, an IAM ARN or a local name (repeatable)")
	fs.Var(&s.tools, "tool", "a tool the model may call (repeatable; default all)")
	fs.Var(&s.meta, "meta", "a label key=value (repeatable)")
	fs.DurationVar(&s.ttl, "ttl", 0, "the approval window ("+approvalTTLRange+"; default the deployment's)")
	fs.IntVar(&s.maxIterations, "max-iterations", 0, "model turns at most")
	fs.Int64Var(&s.maxTokens, "max-tokens", 0, "tokens at most")
	fs.IntVar(&s.maxOutputTokens, "max-output-tokens", 0, "output tokens per model call")
	fs.BoolVar(&s.denialEndsRun, "denial-ends-run", false, "a denied call ends the run")
	fs.BoolVar(&s.fourEyes, "four-eyes", false, "the initiator may not decide")
	fs.StringVar(&s.clientTools, "client-tools", "", "tools you execute yourself: a JSON array of {name, description, input_schema, effect, requires_approval} (- for standard input)")
	fs.Var(&s.executors, "tool-executor", "who may submit client-tool results besides you: a principal, or group:<name> for the members of a directory group (repeatable)")
	fs.DurationVar(&s.toolResultsTTL, "tool-results-ttl", 0, "how long you have to submit client-tool results ("+toolResultsTTLRange+"; default "+shortDuration(service.DefaultToolResultsTTL)+")")
	fs.IntVar(&s.requiredApprovals, "required-approvals", 0, fmt.Sprintf("distinct persons who must approve each held call (1 to %d; at least the deployment policy's)", policy.MaxRequiredApprovals))
	fs.Var(&s.requireApproval, "require-approval", "a tool pattern (a name, <server>__<tool>, a * glob) whose calls need approval in this run even where the policy allows them (repeatable)")
	fs.StringVar(&s.webhookURL, "webhook-url", "", "where agentgate POSTs signed webhooks about the run (https; see \"Webhooks\")")
	fs.Var(&s.webhookEvents, "webhook-event", "an event type to be told of, e.g. run.completed (repeatable; default all); needs --webhook-url")
	fs.StringVar(&s.idempotencyKey, "idempotency-key", "", "start the run at most once under this key (such as a UUID): run again with the same key and request, the command prints the run the first created (see \"Starting a run at most once\")")
	fs.BoolVar(&s.wait, "wait", false, "wait until the run needs a decision or tool results, or ends; exit 1 if it ends other than COMPLETED")
	fs.DurationVar(&s.timeout, "timeout", 30*time.Minute, "with --wait: give up after this long (0: wait without a limit)")
}

// The ranges of runs start --ttl and --tool-results-ttl: the server's
// bounds, checked before any request as for every bad flag value.
var (
	approvalTTLRange    = shortDuration(service.MinApprovalTTL) + " to " + shortDuration(service.MaxApprovalTTL)
	toolResultsTTLRange = shortDuration(service.MinToolResultsTTL) + " to " + shortDuration(service.MaxToolResultsTTL)
)

// shortDuration is d as a flag takes it, without the zero minutes and
// seconds time.Duration.String adds: 1m, 168h, 10s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// readInput reads the file flag names (- for standard input). A file that
// cannot be read is a usage error (exit 2), found before any request, as
// one whose JSON does not decode is.
func readInput(flag, name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(cliStdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usagef("%s: %v", flag, err)
	}
	return b, nil
}

// bodyFields are the flags of `runs start` that set a field of the
// request, by the JSON names of the fields each sets (client.StartRunRequest;
// a test holds the names to its tags). A flag is refused when the --body
// file names one of its fields: a request is said in one place, never
// half in the file and half on the command line with one silently winning.
// The opening flags set either field of the opening (a prompt or
// messages), so each stands for both.
var bodyFields = []struct {
	flag   string
	fields []string
}{
	{"prompt", []string{"prompt", "messages"}},
	{"prompt-file", []string{"prompt", "messages"}},
	{"messages-file", []string{"prompt", "messages"}},
	{"system", []string{"system"}},
	{"model", []string{"model"}},
	{"approver", []string{"approvers"}},
	{"tool", []string{"allowed_tools"}},
	{"meta", []string{"metadata"}},
	{"ttl", []string{"approval_ttl_seconds"}},
	{"max-iterations", []string{"max_iterations"}},
	{"max-tokens", []string{"max_tokens"}},
	{"max-output-tokens", []string{"max_output_tokens"}},
	{"denial-ends-run", []string{"denial_ends_run"}},
	{"four-eyes", []string{"four_eyes"}},
	{"client-tools", []string{"client_tools"}},
	{"tool-executor", []string{"tool_executors"}},
	{"tool-results-ttl", []string{"tool_results_ttl_seconds"}},
	{"required-approvals", []string{"required_approvals"}},
	{"require-approval", []string{"require_approval"}},
	{"webhook-url", []string{"webhook_url"}},
	{"webhook-event", []string{"webhook_events"}},
}

// readBody reads the --body file into req: strictly (an unknown field is
// refused, as the server would), and refusing every flag given for a field
// the file names. A file that does not decode is a usage error (exit 2),
// found before any request.
func (s *startFlags) readBody(req *client.StartRunRequest) error {
	b, err := readInput("--body", s.body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return usagef("--body: %v", err)
	}
	var named map[string]json.RawMessage
	if err := json.Unmarshal(b, &named); err != nil {
		return usagef("--body: %v", err)
	}
	for _, bf := range bodyFields {
		if !s.given(bf.flag) {
			continue
		}
		for _, field := range bf.fields {
			if _, ok := named[field]; ok {
				return usagef("--%s and --body: the body gives %s; give it in the body or as the flag, not both", bf.flag, field)
			}
		}
	}
	return nil
}

func (s *startFlags) request() (client.StartRunRequest, error) {
	var req client.StartRunRequest
	opening := 0
	for _, name := range []string{"prompt", "prompt-file", "messages-file"} {
		if s.given(name) {
			opening++
		}
	}
	if opening > 1 {
		// The server takes a prompt or messages, never both.
		return req, usagef("give one of --prompt, --prompt-file or --messages-file: each is the run's opening")
	}
	if s.body != "" {
		if err := s.readBody(&req); err != nil {
			return req, err
		}
	}
	if s.promptFile != "" {
		b, err := readInput("--prompt-file", s.promptFile)
		if err != nil {
			return req, err
		}
		s.prompt = string(b)
	}
	if s.prompt != "" {
		req.Prompt = s.prompt
	}
	if s.messagesFile != "" {
		b, err := readInput("--messages-file", s.messagesFile)
		if err != nil {
			return req, err
		}
		if err := json.Unmarshal(b, &req.Messages); err != nil {
			return req, usagef("--messages-file: %v", err)
		}
	}
	if s.system != "" {
		req.System = s.system
	}
	if s.model != "" {
		req.Model = s.model
	}
	if len(s.approvers) > 0 {
		req.Approvers = s.approvers
	}
	if len(s.tools) > 0 {
		req.AllowedTools = s.tools
	}
	for _, kv := range s.meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, usagef("--meta %q: want key=value", kv)
		}
		if req.Metadata == nil {
			req.Metadata = map[string]string{}
		}
		req.Metadata[k] = v
	}
	if s.given("ttl") {
		if s.ttl%time.Second != 0 {
			return req, usagef("--ttl %s: whole seconds only", s.ttl)
		}
		if s.ttl < service.MinApprovalTTL || s.ttl > service.MaxApprovalTTL {
			return req, usagef("--ttl %s: want a duration from %s", s.ttl, approvalTTLRange)
		}
		req.ApprovalTTLSeconds = int64(s.ttl / time.Second)
	}
	if s.maxIterations != 0 {
		req.MaxIterations = s.maxIterations
	}
	if s.maxTokens != 0 {
		req.MaxTokens = s.maxTokens
	}
	if s.maxOutputTokens != 0 {
		req.MaxOutputTokens = s.maxOutputTokens
	}
	if s.clientTools != "" {
		b, err := readInput("--client-tools", s.clientTools)
		if err != nil {
			return req, err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req.ClientTools); err != nil {
			return req, usagef("--client-tools: %v", err)
		}
	}
	if len(s.executors) > 0 {
		req.ToolExecutors = s.executors
	}
	if s.given("tool-results-ttl") {
		if s.toolResultsTTL%time.Second != 0 {
			return req, usagef("--tool-results-ttl %s: whole seconds only", s.toolResultsTTL)
		}
		if s.toolResultsTTL < service.MinToolResultsTTL || s.toolResultsTTL > service.MaxToolResultsTTL {
			return req, usagef("--tool-results-ttl %s: want a duration from %s", s.toolResultsTTL, toolResultsTTLRange)
		}
		req.ToolResultsTTLSeconds = int64(s.toolResultsTTL / time.Second)
	}
	if len(req.ClientTools) == 0 {
		// The server refuses these without client tools (422); as flags
		// they do not go together, a usage error found before any request.
		for _, name := range []string{"tool-executor", "tool-results-ttl"} {
			if s.given(name) {
				return req, usagef("--%s needs --client-tools (or client_tools in --body)", name)
			}
		}
	}
	if s.given("required-approvals") {
		if s.requiredApprovals < 1 || s.requiredApprovals > policy.MaxRequiredApprovals {
			return req, usagef("--required-approvals %d: want 1 to %d", s.requiredApprovals, policy.MaxRequiredApprovals)
		}
		req.RequiredApprovals = s.requiredApprovals
	}
	if len(s.requireApproval) > 0 {
		req.RequireApproval = s.requireApproval
	}
	if s.given("webhook-url") {
		if s.webhookURL == "" {
			// The server refuses an empty webhook_url (422); leaving the
			// flag out is how a run asks for no webhooks.
			return req, usagef("--webhook-url is empty: leave it out for no webhooks")
		}
		req.WebhookURL = s.webhookURL
	}
	if len(s.webhookEvents) > 0 {
		if req.WebhookURL == "" {
			return req, usagef("--webhook-event needs --webhook-url (or webhook_url in --body)")
		}
		req.WebhookEvents = s.webhookEvents
	}
	req.DenialEndsRun = req.DenialEndsRun || s.denialEndsRun
	if s.fourEyes {
		req.FourEyes = client.Bool(true)
	}
	switch {
	case req.Prompt == "" && len(req.Messages) == 0:
		return req, usagef("give --prompt, --prompt-file, --messages-file or --body")
	case len(req.Approvers) == 0:
		return req, usagef("give at least one --approver")
	}
	return req, nil
}

// given reports whether the command line set the flag name, so that an
// explicit --ttl 0 is checked against the range rather than taken as the
// default an unset flag leaves.
func (s *startFlags) given(name string) bool {
	set := false
	if s.fs != nil {
		s.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}

// decideFlags are the flags of `runs decide`.
type decideFlags struct {
	digest, message, file string
	approve, deny         bool
	calls                 listFlag
}

func (d *decideFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.digest, "digest", "", "the turn `digest` you reviewed (pending.turn_digest; agentgate approvals show prints it)")
	fs.BoolVar(&d.approve, "approve", false, "approve the whole turn")
	fs.BoolVar(&d.deny, "deny", false, "deny the whole turn")
	fs.StringVar(&d.message, "message", "", "the reason of a denial (shown to the model)")
	fs.Var(&d.calls, "call", "a per-call decision on a call held for approval: ID=approve, ID=deny[:reason] or ID=edit:@file.json (repeatable; calls that need none are left out and run)")
	fs.StringVar(&d.file, "decision-file", "", "the whole decision as JSON (- for standard input)")
}

func (d *decideFlags) decision() (client.Decision, error) {
	var out client.Decision
	modes := 0
	for _, on := range []bool{d.approve, d.deny, len(d.calls) > 0, d.file != ""} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return out, usagef("give exactly one of --approve, --deny, --call or --decision-file")
	}
	if d.file != "" {
		b, err := readInput("--decision-file", d.file)
		if err != nil {
			return out, err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil {
			return out, usagef("--decision-file: %v", err)
		}
	}
	if d.digest != "" {
		out.TurnDigest = d.digest
	}
	if out.TurnDigest == "" {
		return out, usagef("give --digest: the turn digest you reviewed (`agentgate approvals show ID` prints it)")
	}
	switch {
	case d.approve:
		out.Action = client.Approve
	case d.deny:
		out.Action, out.Message = client.Deny, d.message
	case len(d.calls) > 0:
		for _, spec := range d.calls {
			cd, err := parseCallDecision(spec)
			if err != nil {
				return out, err
			}
			out.Calls = append(out.Calls, cd)
		}
	}
	if d.message != "" && !d.deny {
		return out, usagef("--message goes with --deny (per call: --call ID=deny:reason)")
	}
	return out, nil
}

// parseCallDecision reads ID=approve, ID=deny[:reason] or ID=edit:@file.
// The id ends at the first "=" that an action follows, so a call id may
// hold "=" (c=1=approve) and a reason too (c1=deny:a=b).
func parseCallDecision(spec string) (client.CallDecision, error) {
	id, rest, ok := "", "", false
	for i := range len(spec) {
		if spec[i] != '=' {
			continue
		}
		action, _, _ := strings.Cut(spec[i+1:], ":")
		if a := client.Action(action); a == client.Approve || a == client.Deny || a == client.Edit {
			id, rest, ok = spec[:i], spec[i+1:], true
			break
		}
	}
	if !ok {
		id, rest, ok = strings.Cut(spec, "=") // for the messages below
	}
	if !ok || id == "" {
		return client.CallDecision{}, usagef("--call %q: want ID=approve, ID=deny[:reason] or ID=edit:@file.json", spec)
	}
	action, arg, _ := strings.Cut(rest, ":")
	cd := client.CallDecision{CallID: id, Action: client.Action(action)}
	switch cd.Action {
	case client.Approve:
		if arg != "" {
			return cd, usagef("--call %q: approve takes nothing after it", spec)
		}
	case client.Deny:
		cd.Message = arg
	case client.Edit:
		file, ok := strings.CutPrefix(arg, "@")
		if !ok || file == "" {
			return cd, usagef("--call %q: edit takes @file.json with the new arguments", spec)
		}
		b, err := readInput("--call", file)
		if err != nil {
			return cd, err
		}
		if !json.Valid(b) {
			return cd, usagef("--call %q: %s is not JSON", spec, file)
		}
		cd.Input = json.RawMessage(b)
	default:
		return cd, usagef("--call %q: the action is approve, deny or edit", spec)
	}
	return cd, nil
}
