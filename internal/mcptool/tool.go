package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgate/agentgate/internal/loop"
)

// NameSeparator joins a server's name and a tool's name.
const NameSeparator = "__"

// invalidNameChars are the characters no provider accepts in a tool name
// (OpenAI, Bedrock Converse and Anthropic all accept ^[a-zA-Z0-9_-]{1,64}$).
var invalidNameChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// ExposedName is the name the model sees for a server's tool:
// "<server>__<tool>", with every character no provider accepts replaced by "_".
func ExposedName(server, tool string) string {
	return server + NameSeparator + invalidNameChars.ReplaceAllString(tool, "_")
}

// hints are a tool's annotations with the MCP spec defaults filled in.
type hints struct {
	ReadOnly    bool `json:"readOnlyHint"`
	Destructive bool `json:"destructiveHint"`
	Idempotent  bool `json:"idempotentHint"`
	OpenWorld   bool `json:"openWorldHint"`
	// Given is false when the server sent no annotations at all.
	Given bool `json:"annotated"`
}

func hintsOf(a *mcp.ToolAnnotations) hints {
	h := hints{Destructive: true, OpenWorld: true}
	if a == nil {
		return h
	}
	h.Given = true
	h.ReadOnly = a.ReadOnlyHint
	h.Idempotent = a.IdempotentHint
	if a.DestructiveHint != nil {
		h.Destructive = *a.DestructiveHint
	}
	if a.OpenWorldHint != nil {
		h.OpenWorld = *a.OpenWorldHint
	}
	return h
}

// rule is how the loop gates a remote tool, and why.
type rule struct {
	effect           loop.Effect
	requiresApproval bool
	noApproval       bool
	why              string
}

// ruleFor decides a tool's effect and approval: approval by default; a read
// only for a trusted server's readOnlyHint; the file's override wins.
func ruleFor(s Server, h hints, override Approval) rule {
	r := rule{effect: loop.EffectWrite}
	switch {
	case s.TrustAnnotations && h.ReadOnly:
		r.effect = loop.EffectRead
		r.why = "read-only (readOnlyHint: true, and this server's annotations are trusted)"
	case !s.TrustAnnotations && h.ReadOnly:
		r.why = "needs approval: the server says read-only, but its annotations are not trusted (trust_annotations is off)"
	case !h.Given:
		r.why = "needs approval: the server gives no annotations (MCP defaults: not read-only, destructive, open world)"
	default:
		r.why = "needs approval: not read-only"
	}
	switch override {
	case ApprovalAlways:
		r.requiresApproval = true
		r.why = "needs approval: the tool-sources file says approval \"always\""
	case ApprovalNever:
		r.noApproval = r.effect == loop.EffectWrite
		r.why = "runs without approval: the tool-sources file says approval \"never\""
	}
	return r
}

// remoteTool is one tool of an MCP server as a loop.Tool. Its definition
// is the one of the server's last listing in this process: every listing
// (CurrentDefinition) refreshes it.
type remoteTool struct {
	server *serverTools
	// name is the server's own name of the tool.
	name  string
	state atomic.Pointer[toolState]
}

// toolState is a remote tool as one listing described it.
type toolState struct {
	def  loop.Definition
	h    hints
	rule rule
	// removed: the listing no longer offers the tool, or (twice) offers
	// it more than once.
	removed, twice bool
}

var (
	_ loop.Tool              = (*remoteTool)(nil)
	_ loop.Previewer         = (*remoteTool)(nil)
	_ loop.DefinitionChecker = (*remoteTool)(nil)
)

// newRemoteTool builds the loop tool of a listed MCP tool.
func newRemoteTool(st *serverTools, t *mcp.Tool) (*remoteTool, error) {
	state, err := stateOf(st.server, t)
	if err != nil {
		return nil, err
	}
	rt := &remoteTool{server: st, name: t.Name}
	rt.state.Store(state)
	return rt, nil
}

// stateOf is the loop definition and gate of a listed MCP tool.
func stateOf(s Server, t *mcp.Tool) (*toolState, error) {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	h := hintsOf(t.Annotations)
	override := s.Approval[t.Name]
	if override == "" {
		override = ApprovalDefault
	}
	r := ruleFor(s, h, override)
	ann, err := json.Marshal(struct {
		Server           string   `json:"server"`
		Tool             string   `json:"tool"`
		TrustAnnotations bool     `json:"trust_annotations"`
		Hints            hints    `json:"hints"`
		Approval         Approval `json:"approval"`
	}{s.Name, t.Name, s.TrustAnnotations, h, override})
	if err != nil {
		return nil, err
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, s.Name)
	}
	return &toolState{
		h:    h,
		rule: r,
		def: loop.Definition{
			Name:             ExposedName(s.Name, t.Name),
			Description:      desc,
			InputSchema:      schema,
			Effect:           r.effect,
			RequiresApproval: r.requiresApproval,
			NoApproval:       r.noApproval,
			Annotations:      ann,
		},
	}, nil
}

// removedState is a tool the server no longer offers: its definition
// matches no hash recorded before, and calls of it are not sent.
func removedState(was *toolState) *toolState {
	gone := *was
	gone.removed = true
	gone.def.Annotations = json.RawMessage(`{"removed":true}`)
	return &gone
}

// Definition returns the tool's definition as the server's last listing
// in this process described it.
func (t *remoteTool) Definition() loop.Definition { return t.state.Load().def }

// CurrentDefinition lists the server again (one listing for every tool of
// the server that asks meanwhile), refreshes the definitions of the
// server's tools in this process with it, and returns the tool's. A tool
// the server no longer offers returns a definition that matches nothing.
func (t *remoteTool) CurrentDefinition(ctx context.Context) (loop.Definition, error) {
	if err := t.server.refresh(ctx); err != nil {
		return loop.Definition{}, err
	}
	return t.state.Load().def, nil
}

// Preview shows approvers what the call is: the server, the tool's hints
// and description, why it needs approval, and the arguments as pretty JSON.
func (t *remoteTool) Preview(_ context.Context, input json.RawMessage) (string, error) {
	var b strings.Builder
	s := t.server.server
	st := t.state.Load()
	fmt.Fprintf(&b, "MCP tool %q on server %q", t.name, s.Name)
	if info := t.server.conn.serverInfo(); info != nil {
		label := info.Title
		if label == "" {
			label = info.Name
		}
		if label != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(label, 120))
		}
		if info.Description != "" {
			fmt.Fprintf(&b, "\nServer: %s", oneLine(info.Description, 300))
		}
	}
	switch {
	case st.twice:
		fmt.Fprintf(&b, "\nThe server lists this tool twice, so which definition holds is unknown: the call will fail.")
	case st.removed:
		fmt.Fprintf(&b, "\nThe server no longer offers this tool: the call will fail.")
	}
	fmt.Fprintf(&b, "\n%s", st.rule.why)
	// A hint the server leaves out of its annotations takes the MCP
	// default, so "declared" is said of the annotations, not of each hint.
	given := "the server's annotations; a hint they leave out is the MCP default (destructive and openWorld true, the others false)"
	if !st.h.Given {
		given = "MCP defaults: the server declares none"
	}
	fmt.Fprintf(&b, "\nHints (%s; advisory): destructive=%t idempotent=%t openWorld=%t readOnly=%t",
		given, st.h.Destructive, st.h.Idempotent, st.h.OpenWorld, st.h.ReadOnly)
	fmt.Fprintf(&b, "\nDescription: %s", oneLine(st.def.Description, 500))
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, input, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(input)
	}
	fmt.Fprintf(&b, "\nArguments:\n%s", pretty.String())
	return b.String(), nil
}

// Call sends tools/call with the arguments and the idempotency key. See the
// package documentation for retries and the write fence.
func (t *remoteTool) Call(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	s := t.server.server
	st := t.state.Load()
	switch {
	case st.twice:
		return loop.ErrorResult("Error: the MCP server %s lists the tool %s twice; it was not called", s.Name, t.name), nil
	case st.removed:
		return loop.ErrorResult("Error: the MCP server %s no longer offers the tool %s; it was not called", s.Name, t.name), nil
	}
	key := loop.IdempotencyKey(ctx)
	callCtx, cancel := context.WithTimeout(ctx, s.Timeout())
	defer cancel()
	start := time.Now()
	read := st.def.Effect == loop.EffectRead
	var (
		res      *mcp.CallToolResult
		err      error
		attempts int
	)
	for attempts = 1; ; attempts++ {
		res, err = t.server.conn.callTool(callCtx, t.name, input, key, !read)
		var ce *callError
		if err == nil || !errors.As(err, &ce) || ce.outcome == outcomeRefused || attempts == maxAttempts || ctx.Err() != nil {
			break
		}
		// A read may be sent again; a write only when it never left.
		if !read && ce.outcome != outcomeNotSent {
			break
		}
		select {
		case <-callCtx.Done():
		case <-time.After(backoff(attempts)):
		}
		if callCtx.Err() != nil {
			break
		}
	}
	err = s.scrub(err)
	log := t.server.logger.With("server", s.Name, "tool", t.name, "effect", string(st.def.Effect),
		"duration_ms", time.Since(start).Milliseconds(), "attempts", attempts)
	if err == nil {
		out := resultOf(res)
		log.InfoContext(ctx, "mcp tool call", "outcome", outcomeLabel(out))
		return out, nil
	}
	if ctx.Err() != nil {
		log.WarnContext(ctx, "mcp tool call", "outcome", "cancelled", "err", err)
		return loop.Result{}, ctx.Err()
	}
	var ce *callError
	errors.As(err, &ce)
	switch {
	case ce != nil && ce.outcome == outcomeRefused:
		log.InfoContext(ctx, "mcp tool call", "outcome", "refused_by_server", "err", err)
		return loop.ErrorResult("Error: the MCP server %s refused the call of %s: %s", s.Name, t.name, oneLine(err.Error(), 500)), nil
	case ce != nil && ce.outcome == outcomeNotSent:
		log.WarnContext(ctx, "mcp tool call", "outcome", "unreachable", "err", err)
		return loop.ErrorResult("Error: the MCP server %s could not be reached, %s did not run (%s)", s.Name, t.name, callCause(err)), nil
	case read:
		// The read may have reached the server (and run there): only
		// its answer is missing. It reads, so nothing is left undone.
		log.WarnContext(ctx, "mcp tool call", "outcome", "no_answer", "err", err)
		tries := fmt.Sprintf("%d attempts", attempts)
		if attempts == 1 {
			tries = "its one attempt"
		}
		return loop.ErrorResult("Error: the MCP server %s gave no usable answer to %s in %s (%s)", s.Name, t.name, tries, callCause(err)), nil
	default:
		// The write may have happened: the fence decides (interrupted_write).
		log.ErrorContext(ctx, "mcp tool call", "outcome", "unknown", "err", err)
		return loop.Result{}, fmt.Errorf("MCP server %s, tool %s: %w", s.Name, t.name,
			&loop.OutcomeUnknownError{Cause: unknownCause(err, s.Timeout()), Err: err})
	}
}

// unknownCause says why a write's outcome is unknown in words fit for the
// run's readers: what happened, never the transport's own message (it may
// hold the server's address).
func unknownCause(err error, timeout time.Duration) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within the call's timeout of %s: context deadline exceeded", timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was lost after the request was sent"
	default:
		return "the request may have reached the server, and no usable answer came"
	}
}

// callCause is transportCause for a call or a listing that failed: what
// went wrong, never the transport's message with the server's address.
func callCause(err error) string {
	if c := transportCause(err); c != "" {
		return c
	}
	return "the request failed; the agentgate log has the error"
}

// maxAttempts bounds the attempts of one call (within its timeout).
const maxAttempts = 3

func outcomeLabel(r loop.Result) string {
	if r.IsError {
		return "tool_error"
	}
	return "ok"
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// serverTools is one connected server with the tools the file keeps.
type serverTools struct {
	server Server
	conn   *conn
	logger *slog.Logger
	// added is called when a listing added tools (the catalog changed).
	added func()
	mu    sync.Mutex
	// tools are the server's tools this process offers, by exposed name;
	// a later listing may add some (never in place: readers keep theirs).
	tools []*remoteTool
	// listing is the listing in flight, which callers of refresh share.
	listing *listing
	// listed is the last listing that succeeded.
	listed *listing
	// listedAt is when the last listing that succeeded (at start-up or
	// later) answered: when the tools' definitions were read.
	listedAt time.Time
	// now is the catalog's clock, which spaces the listings of
	// list_every_seconds; begun is when the last listing began on it
	// (start-up counts), whatever brought it about and however it ended.
	now   func() time.Time
	begun time.Time
}

// lastBegun is when the server's last listing began (Catalog.Relist).
func (st *serverTools) lastBegun() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.begun
}

// busy reports a listing in flight.
func (st *serverTools) busy() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.listing != nil
}

// listing is one tools/list of the server (all pages) and its outcome.
type listing struct {
	started time.Time
	done    chan struct{}
	err     error
}

// current returns the server's tools this process offers now.
func (st *serverTools) current() []*remoteTool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.tools
}

// refresh lists the server's tools, refreshes the definition of every
// tool of it this process exposes, and adds the tools the listing offers
// that the process did not (addNew). Callers that come while a listing is
// in flight wait for that one instead of sending another, and the tools of
// one turn the loop asks about (loop.DefinitionsAskedAt) share a listing
// that began after the loop began asking.
func (st *serverTools) refresh(ctx context.Context) error {
	st.mu.Lock()
	if at, ok := loop.DefinitionsAskedAt(ctx); ok && st.listed != nil && !st.listed.started.Before(at) {
		st.mu.Unlock()
		return nil
	}
	l := st.listing
	lead := l == nil
	if lead {
		l = &listing{started: time.Now(), done: make(chan struct{})}
		st.listing = l
		if st.now != nil {
			st.begun = st.now()
		}
	}
	st.mu.Unlock()
	if lead {
		st.list(ctx, l)
	}
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// list runs the listing l, bounded by the server's timeout and ctx (its
// followers then get the leader's error: their calls stay unconfirmed),
// and applies it.
func (st *serverTools) list(ctx context.Context, l *listing) {
	defer close(l.done)
	defer func() {
		st.mu.Lock()
		st.listing = nil
		if l.err == nil {
			st.listed = l
		}
		st.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, st.server.Timeout())
	defer cancel()
	listed, err := st.conn.listTools(ctx)
	if err != nil {
		err = st.server.scrub(err)
		st.logger.WarnContext(ctx, "mcp tools/list", "server", st.server.Name, "err", err)
		st.mu.Lock()
		at := st.listedAt
		st.mu.Unlock()
		// The cause reaches approvers (a held call's note) and the model
		// (a call that could not be confirmed): what went wrong, never the
		// transport's message, which holds the server's address.
		ue := &loop.DefinitionUnavailableError{ListedAt: at}
		if c := transportCause(err); c != "" {
			ue.Cause = c
			ue.Err = fmt.Errorf("MCP server %s could not be reached (%s)", st.server.Name, c)
		} else {
			ue.Cause = "the server did not list its tools; the agentgate log has the error"
			ue.Err = fmt.Errorf("MCP server %s did not list its tools; the agentgate log has the error", st.server.Name)
		}
		l.err = ue
		return
	}
	st.mu.Lock()
	st.listedAt = time.Now()
	st.mu.Unlock()
	byName := make(map[string]*mcp.Tool, len(listed))
	twice := map[string]bool{}
	for _, mt := range listed {
		if _, dup := byName[mt.Name]; dup {
			twice[mt.Name] = true
		}
		byName[mt.Name] = mt
	}
	tools := st.current()
	for _, t := range tools {
		was := t.state.Load()
		now := was
		if mt, ok := byName[t.name]; !ok || twice[t.name] {
			// Not offered, or offered twice (which definition holds is
			// unknowable, and start-up refuses such a listing): the tool
			// is not called until a listing offers it once, whatever
			// either copy says of itself.
			if twice[t.name] {
				st.logger.WarnContext(ctx, "the MCP server lists the tool twice; it is not called until it lists it once", "server", st.server.Name, "tool", t.name)
			}
			if !was.removed || was.twice != twice[t.name] {
				now = removedState(was)
				now.twice = twice[t.name]
			}
		} else if fresh, err := stateOf(st.server, mt); err == nil {
			now = fresh
		}
		if now == was {
			continue
		}
		t.state.Store(now)
		if !sameDefinition(was.def, now.def) {
			st.logger.InfoContext(ctx, "mcp tool definition changed; this process uses the new one", "server", st.server.Name, "tool", t.name, "removed", now.removed)
		}
	}
	st.addNew(ctx, tools, listed, twice)
}

// addNew adds the tools of a listing that the process does not offer yet
// and the file keeps (include, exclude): each is gated by the same rules
// as a tool listed at start-up (ruleFor: the server's trust, the tool's
// annotations and the file's approval override; a tool the file says
// nothing of needs approval unless it is a trusted read). A tool is left
// out, and logged, when the listing offers it twice, when its exposed
// name is too long or is also another tool's (start-up refuses both; here
// neither tool is believed, and one offered before stays as it was), or
// when its input schema does not compile. tools are the ones offered
// before the listing.
func (st *serverTools) addNew(ctx context.Context, tools []*remoteTool, listed []*mcp.Tool, twice map[string]bool) {
	have := make(map[string]bool, len(tools))
	exposed := make(map[string]int, len(tools)+len(listed))
	for _, t := range tools {
		have[t.name] = true
		exposed[t.Definition().Name]++
	}
	var fresh []*remoteTool
	for _, mt := range listed {
		if have[mt.Name] || twice[mt.Name] || !st.server.offers(mt.Name) {
			continue
		}
		have[mt.Name] = true
		t, err := newRemoteTool(st, mt)
		if err == nil {
			_, err = loop.NewToolbox(t)
		}
		if err != nil {
			st.logger.WarnContext(ctx, "the MCP server offers a new tool that cannot be offered; it is left out", "server", st.server.Name, "tool", mt.Name, "err", err)
			continue
		}
		exposed[t.Definition().Name]++
		fresh = append(fresh, t)
	}
	var added []*remoteTool
	for _, t := range fresh {
		name := t.Definition().Name
		switch {
		case exposed[name] > 1:
			st.logger.WarnContext(ctx, "the MCP server offers a new tool whose exposed name another tool has; it is left out (exclude one of them)", "server", st.server.Name, "tool", t.name, "exposed", name)
		case len(name) > MaxToolNameLen:
			st.logger.WarnContext(ctx, "the MCP server offers a new tool whose exposed name is too long; it is left out", "server", st.server.Name, "tool", t.name, "exposed", name, "max", MaxToolNameLen)
		default:
			added = append(added, t)
		}
	}
	if len(added) == 0 {
		return
	}
	names := make([]string, len(added))
	for i, t := range added {
		names[i] = t.Definition().Name
	}
	st.mu.Lock()
	next := append(append([]*remoteTool(nil), st.tools...), added...)
	sortTools(next)
	st.tools = next
	st.mu.Unlock()
	st.logger.InfoContext(ctx, "the MCP server offers new tools; runs that start from now on are offered them", "server", st.server.Name, "tools", names)
	if st.added != nil {
		st.added()
	}
}

// sameDefinition reports whether two definitions hash alike.
func sameDefinition(a, b loop.Definition) bool {
	ha, errA := loop.DefinitionHash(a)
	hb, errB := loop.DefinitionHash(b)
	return errA == nil && errB == nil && ha == hb
}
