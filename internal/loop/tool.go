package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentgate/agentgate/internal/strictjson"
)

// Effect is what a tool declares it does to the world.
type Effect string

// The effects a tool can declare. A write effect implies approval.
const (
	EffectRead  Effect = "read"
	EffectWrite Effect = "write"
)

// Definition describes a tool: what the model sees (name, description, input
// schema) and what the loop needs to gate it (effect, idempotency, approval).
type Definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Effect      Effect          `json:"effect"`
	// Idempotent says a repeated call with the same idempotency key has no
	// further effect, so an interrupted call may be retried.
	Idempotent bool `json:"idempotent,omitempty"`
	// RequiresApproval is the explicit approval marker, for read tools that
	// still need a human (writes need approval regardless, unless NoApproval).
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// NoApproval exempts a write from "a write needs approval": a deployment's
	// explicit decision (a tool-sources override "never"). The call still runs
	// behind the write fence, and RequiresApproval, the tool's ArgumentPolicy
	// and the runner's Policy still apply.
	NoApproval bool `json:"no_approval,omitempty"`
	// Annotations are further facts about the tool that its definition hash
	// covers (for a remote MCP tool: its server and annotations), as a JSON
	// object; empty for builtin tools.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Client marks a tool the run's caller executes itself (a client tool,
	// see ClientTool): the loop never calls it; an approved call of it is
	// handed over and its result comes back with ResumeWithResults.
	Client bool `json:"client,omitempty"`
}

// Spec returns what the model is told about the tool.
func (d Definition) Spec() ToolSpec {
	return ToolSpec{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema}
}

// Result is the outcome of a tool call as the model sees it. A tool failure is
// a Result with IsError set, not a Go error.
type Result struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	// BaseChanged is set, with IsError, by a tool that refused an approved
	// call because what the call's preview was computed from changed after
	// the approver reviewed it (see PreviewBase): the call changed nothing.
	// The loop records it on the call's tool_executed step; it is not part
	// of the transcript and is never encoded.
	BaseChanged bool `json:"-"`
	// Replayed is set by a tool that answered a call its idempotency key
	// had already applied (a retry after a crash) with the first call's
	// result, applying nothing again. The loop records it on the call's
	// tool_executed step, so the audit trail tells a replay from a second
	// execution; it is not part of the transcript and is never encoded.
	Replayed bool `json:"-"`
}

// ErrorResult returns an error result with the formatted message.
func ErrorResult(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// ErrNoEffect marks a Go error from a write tool's Call as one that happened
// before the call changed anything (the store was unreachable before the
// write began, say). Wrap it: fmt.Errorf("read marker: %w: %w", loop.ErrNoEffect, err).
// The loop then clears the call's pending-effect fence before it stops the
// run, so the run ends as an infrastructure failure and not as an
// interrupted write. A tool returns it only when it knows nothing happened;
// when in doubt it returns the plain error.
var ErrNoEffect = errors.New("the call failed before it had any effect")

// OutcomeUnknownError is a write tool's Go error saying that its write may
// or may not have taken effect (its request may have reached a server that
// never answered, say). The loop stops the run with the call's fence still
// stamped, so the run ends interrupted_write and the call is never made
// again. Cause is a short reason fit for whoever reads the run (its
// output.detail quotes it): never credentials, arguments or a server's
// address. Err is the full error, for the log.
type OutcomeUnknownError struct {
	Cause string
	Err   error
}

// Error says that the outcome is unknown, with the full error.
func (e *OutcomeUnknownError) Error() string {
	return "the outcome of the write is unknown: " + e.Err.Error()
}

// Unwrap returns the full error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// Tool is a capability the model may call. Call returns a Go error only for
// infrastructure failures and cancellation; the loop then stops the run.
type Tool interface {
	Definition() Definition
	Call(ctx context.Context, input json.RawMessage) (Result, error)
}

// Previewer is implemented by tools that can show what a call would change
// (for writes: a diff) without changing anything. Previews are captured at
// suspension and shown to approvers.
type Previewer interface {
	Preview(ctx context.Context, input json.RawMessage) (string, error)
}

// BasedPreviewer is implemented by Previewers whose preview depends on
// state outside the call's input (a document's current text, say) that may
// change while the call waits for approval. PreviewWithBase returns the
// preview and a base: an opaque token for the state the preview was
// computed from, read once with it ("" for none). The loop keeps the base
// with the held call (PendingCall.PreviewBase) and runs the approved or
// edited call with it in its context (PreviewBase), so the tool can refuse
// to act on state the approver never saw: it then returns an error result
// with BaseChanged set, before any effect.
type BasedPreviewer interface {
	Previewer
	PreviewWithBase(ctx context.Context, input json.RawMessage) (preview, base string, err error)
}

// DefinitionChecker is implemented by tools whose definition lives outside
// this process (a remote server's tool) and may change while the process
// runs. CurrentDefinition asks the source for the definition it has now;
// a tool that caches its definition refreshes that cache with the answer,
// so Definition returns it from then on (and the Toolbox follows: it
// recompiles the schema and the hash of such a tool when its Definition
// changes).
//
// The loop asks at two moments. When a turn is about to be held for
// approval, it asks every DefinitionChecker tool of the turn, so the call
// is planned, previewed and hashed on the definition the source has now,
// not on a stale copy. Before a resumed (or continued) turn runs, it asks
// the tool of each call that is to run: one that no longer hashes to the
// hash recorded when the call was held refuses the resume (ErrToolChanged)
// and nothing of the turn runs; an error (the source cannot be reached)
// gives that call an error result instead of running it.
type DefinitionChecker interface {
	CurrentDefinition(ctx context.Context) (Definition, error)
}

// DefinitionUnavailableError is what a DefinitionChecker returns when it
// could not ask its source (the server could not be reached, say). Cause
// says why in a few words fit for approvers: never a transport's message,
// a server's address or credentials. ListedAt is when the definition the
// tool still has was read from the source (zero: unknown). Err is the full
// error; Error returns its message, which is what the model is told when
// a call could not be confirmed before it was to run.
//
// A turn held while a checker answers with an error is held on the
// definition the tool still has, and each of its calls of that tool says
// so (PendingCall.DefinitionUnverified).
type DefinitionUnavailableError struct {
	Cause    string
	ListedAt time.Time
	Err      error
}

// Error returns the full error's message.
func (e *DefinitionUnavailableError) Error() string {
	if e.Err == nil {
		return e.Cause
	}
	return e.Err.Error()
}

// Unwrap returns the full error.
func (e *DefinitionUnavailableError) Unwrap() error { return e.Err }

// ArgumentPolicy is implemented by tools whose need for approval depends on the
// arguments of a call (for example a read tool that needs approval for some paths).
type ArgumentPolicy interface {
	NeedsApproval(input json.RawMessage) bool
}

// FuncTool is a Tool built from functions; the optional PreviewFunc (or
// BasedPreviewFunc) and NeedsApprovalFunc make it a Previewer (a
// BasedPreviewer) and an ArgumentPolicy.
type FuncTool struct {
	Def         Definition
	CallFunc    func(ctx context.Context, input json.RawMessage) (Result, error)
	PreviewFunc func(ctx context.Context, input json.RawMessage) (string, error)
	// BasedPreviewFunc, when set, is used instead of PreviewFunc and also
	// returns the preview's base (see BasedPreviewer).
	BasedPreviewFunc  func(ctx context.Context, input json.RawMessage) (preview, base string, err error)
	NeedsApprovalFunc func(input json.RawMessage) bool
}

var (
	_ Tool           = (*FuncTool)(nil)
	_ BasedPreviewer = (*FuncTool)(nil)
	_ ArgumentPolicy = (*FuncTool)(nil)
)

// Definition returns the tool's definition.
func (t *FuncTool) Definition() Definition { return t.Def }

// Call runs CallFunc.
func (t *FuncTool) Call(ctx context.Context, input json.RawMessage) (Result, error) {
	return t.CallFunc(ctx, input)
}

// Preview returns the preview of PreviewWithBase.
func (t *FuncTool) Preview(ctx context.Context, input json.RawMessage) (string, error) {
	text, _, err := t.PreviewWithBase(ctx, input)
	return text, err
}

// PreviewWithBase runs BasedPreviewFunc, or else PreviewFunc (with no
// base), or returns "" when there is neither.
func (t *FuncTool) PreviewWithBase(ctx context.Context, input json.RawMessage) (string, string, error) {
	switch {
	case t.BasedPreviewFunc != nil:
		return t.BasedPreviewFunc(ctx, input)
	case t.PreviewFunc != nil:
		text, err := t.PreviewFunc(ctx, input)
		return text, "", err
	}
	return "", "", nil
}

// NeedsApproval runs NeedsApprovalFunc, or returns false when there is none.
func (t *FuncTool) NeedsApproval(input json.RawMessage) bool {
	return t.NeedsApprovalFunc != nil && t.NeedsApprovalFunc(input)
}

// Toolbox holds the tools a runner may offer, each with its compiled input
// schema. A toolbox made by NewToolbox is fixed once in use. One made by
// NewToolboxWithSource follows its ToolSource: each method reads the
// toolbox's current snapshot, which is made again when the source's tools
// change; a run takes one snapshot (Revive) and keeps it, so the tools of
// a run in flight never change under it.
type Toolbox struct {
	tools map[string]Tool
	// entries hold each tool's compiled schema and hash; a toolbox made
	// by With shares them with the one it was made from.
	entries map[string]*toolEntry
	order   []string
	absent  []absentTools
	// client lists the names of client tools (Definition.Client), in order.
	client []string
	// live is set on a toolbox made by NewToolboxWithSource: its tools
	// are those of live's current snapshot (view).
	live *liveTools
	// from is set on a snapshot of a toolbox with a source, and on a
	// toolbox made by With from one: the source's live tools, the snapshot
	// of them this toolbox was made from (base), and the tools With added
	// to it (own). Revive makes the same toolbox again from a newer
	// snapshot.
	from *liveTools
	base *Toolbox
	own  []Tool
}

// absentTools explains why tools whose names start with prefix are missing.
type absentTools struct{ prefix, reason string }

// NewToolbox builds a toolbox; tool names must be unique and non-empty, the
// effect must be read or write, and every input schema must compile.
func NewToolbox(tools ...Tool) (*Toolbox, error) {
	tb := &Toolbox{tools: map[string]Tool{}, entries: map[string]*toolEntry{}}
	for _, t := range tools {
		if err := tb.add(t); err != nil {
			return nil, err
		}
	}
	return tb, nil
}

// With returns a new toolbox holding tb's tools (and the absences noted on
// it) and the given ones, under the rules of NewToolbox; a name already in
// tb, or one under a prefix whose tools tb noted as absent (an MCP server's
// "<server>__"), is refused. tb is not changed. A run's client tools are
// added to the deployment's toolbox this way.
func (tb *Toolbox) With(tools ...Tool) (*Toolbox, error) {
	tb = tb.view()
	out := &Toolbox{
		tools:   maps.Clone(tb.tools),
		entries: maps.Clone(tb.entries),
		order:   slices.Clone(tb.order),
		absent:  slices.Clone(tb.absent),
		client:  slices.Clone(tb.client),
		from:    tb.from,
		base:    tb.base,
		own:     append(slices.Clone(tb.own), tools...),
	}
	for _, t := range tools {
		if name := t.Definition().Name; out.noted(name) {
			return nil, fmt.Errorf("tool %q: the name belongs to a tool source of this deployment (%s)", name, out.Missing(name))
		}
		if err := out.add(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// add checks and adds one tool.
func (tb *Toolbox) add(t Tool) error {
	def := t.Definition()
	if def.Name == "" {
		return fmt.Errorf("tool with empty name")
	}
	if _, dup := tb.tools[def.Name]; dup {
		return fmt.Errorf("tool %q defined twice", def.Name)
	}
	if def.Effect != EffectRead && def.Effect != EffectWrite {
		return fmt.Errorf("tool %q: effect must be %q or %q, got %q", def.Name, EffectRead, EffectWrite, def.Effect)
	}
	if def.Client && def.NoApproval {
		return fmt.Errorf("tool %q: a client tool cannot be exempt from approval", def.Name)
	}
	schema, err := compileSchema(def)
	if err != nil {
		return err
	}
	if def.Client {
		// A caller's schema: the compiler checks no keyword's value
		// against the meta-schema, and a misspelled type would make
		// every input fail (or pass) at the call rather than here.
		if err := checkTypeNames(def.InputSchema); err != nil {
			return fmt.Errorf("tool %q: input schema does not compile: %w", def.Name, err)
		}
	}
	hash, err := DefinitionHash(def)
	if err != nil {
		return err
	}
	tb.tools[def.Name] = t
	e := &toolEntry{tool: t, def: def, schema: schema, hash: hash}
	_, e.changeable = t.(DefinitionChecker)
	tb.entries[def.Name] = e
	tb.order = append(tb.order, def.Name)
	if def.Client {
		tb.client = append(tb.client, def.Name)
	}
	return nil
}

// ClientNames returns the names of the client tools (Definition.Client),
// in the order they were added.
func (tb *Toolbox) ClientNames() []string { return slices.Clone(tb.view().client) }

// compileSchema resolves a tool's input schema (draft 2020-12 or draft-07).
// The validator is github.com/google/jsonschema-go, which the MCP SDK links
// anyway and whose package init costs nothing; santhosh-tekuri/jsonschema
// compiled all its meta-schemas at init, ~14 ms of every Lambda cold start.
func compileSchema(def Definition) (*jsonschema.Resolved, error) {
	raw := def.InputSchema
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("tool %q: input schema is not JSON", def.Name)
	}
	if d := jsonDepth(raw); d > maxSchemaDepth {
		return nil, fmt.Errorf("tool %q: input schema nests %d levels deep, at most %d allowed", def.Name, d, maxSchemaDepth)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("tool %q: input schema does not compile: %s", def.Name, schemaProblem(err))
	}
	var remote *remoteRefError
	r, err := s.Resolve(&jsonschema.ResolveOptions{Loader: refuseRemote(&remote)})
	if err != nil {
		if remote != nil && errors.Is(err, errRemoteRef) {
			return nil, fmt.Errorf("tool %q: input schema does not compile: %w", def.Name, remote)
		}
		return nil, fmt.Errorf("tool %q: input schema does not compile: %s", def.Name, schemaProblem(err))
	}
	if err := checkRefCycles(&s); err != nil {
		return nil, fmt.Errorf("tool %q: input schema does not compile: %w", def.Name, err)
	}
	return r, nil
}

// schemaProblem says what is wrong with a schema in the schema's own terms:
// the keyword whose value has the wrong JSON type, never the compiler's Go
// types ("map[string]*jsonschema.Schema"), which callers cannot act on.
func schemaProblem(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := ute.Field
		if i := strings.LastIndex(field, "."); i >= 0 {
			field = field[i+1:]
		}
		if field == "" {
			return fmt.Sprintf("a schema cannot be a JSON %s", ute.Value)
		}
		return fmt.Sprintf("keyword %q cannot have a JSON %s as its value", field, ute.Value)
	}
	msg := err.Error()
	for _, internal := range []string{"jsonschema.Schema: ", "<anonymous schema>: "} {
		msg = strings.ReplaceAll(msg, internal, "")
	}
	// A $ref to a pointer the schema does not have.
	return missingPointer.ReplaceAllString(msg, `$$ref "#$1" points to nothing in the schema (it has no "$2" there)`)
}

// Lookup returns the named tool.
func (tb *Toolbox) Lookup(name string) (Tool, bool) {
	t, ok := tb.view().tools[name]
	return t, ok
}

// NoteAbsent records why tools whose names start with prefix are missing
// (for example "crm__" when that MCP server could not be reached at
// start-up), so that Missing can tell callers. Call it before the toolbox
// is in use. (A ToolSource notes the absences of its own tools.)
func (tb *Toolbox) NoteAbsent(prefix, reason string) {
	if tb.live != nil {
		tb.live.note(absentTools{prefix, reason})
		return
	}
	tb.absent = append(tb.absent, absentTools{prefix, reason})
}

// Missing says why the named tool is not in the toolbox: the reason noted
// for its prefix, or that no such tool exists.
func (tb *Toolbox) Missing(name string) string {
	tb = tb.view()
	for _, a := range tb.absent {
		if strings.HasPrefix(name, a.prefix) {
			return fmt.Sprintf("tool %q is unavailable: %s", name, a.reason)
		}
	}
	return fmt.Sprintf("unknown tool %q", name)
}

// AbsentPrefixes returns the prefixes of the tools noted as absent
// (NoteAbsent), in the order noted.
func (tb *Toolbox) AbsentPrefixes() []string {
	tb = tb.view()
	out := make([]string, len(tb.absent))
	for i, a := range tb.absent {
		out[i] = a.prefix
	}
	return out
}

// noted reports whether a reason was noted for the named tool's absence.
func (tb *Toolbox) noted(name string) bool {
	tb = tb.view()
	for _, a := range tb.absent {
		if strings.HasPrefix(name, a.prefix) {
			return true
		}
	}
	return false
}

// Names returns the tool names in the order they were added.
func (tb *Toolbox) Names() []string { return append([]string(nil), tb.view().order...) }

// Hash returns the definition hash of the named tool (of the definition
// it has now, for a DefinitionChecker).
func (tb *Toolbox) Hash(name string) (string, bool) {
	e, ok := tb.view().entries[name]
	if !ok {
		return "", false
	}
	hash, _, _ := e.current()
	return hash, true
}

// ValidateInput checks a call's input: one JSON object that means one
// thing (CheckInputForm) and matches the named tool's schema. An empty
// input is {}.
func (tb *Toolbox) ValidateInput(name string, input json.RawMessage) error {
	e, ok := tb.view().entries[name]
	if !ok {
		return fmt.Errorf("unknown tool %q", name)
	}
	_, s, err := e.current()
	if err != nil {
		return err
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	if err := CheckInputForm(name, input); err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return fmt.Errorf("input is not valid JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("input does not match the schema of %q: %s", name, inputProblem(err, s))
	}
	return nil
}

// CheckInputForm reports why the input of a call of the named tool cannot
// be taken as written, whatever the tool's schema: it must be one JSON
// object, and I-JSON (RFC 7493: no member name twice in one object at any
// depth, valid UTF-8, no lone surrogate escape), checked with
// strictjson.Value, as the API checks its request bodies. Of an input that
// is not I-JSON, encoding/json (the schema validator's, the policy's, the
// turn digest's reading) takes the last of two equal names and U+FFFD for
// the rest, while a tool, a caller or an approver shown the text may read
// it otherwise: {"qty":2000,"qty":2} would be judged as {"qty":2} and
// handed over as written. The error reads "the input of tool "t" is not
// valid: member "qty" appears twice in the same object".
func CheckInputForm(name string, input json.RawMessage) error {
	if err := strictjson.Value(input); err != nil {
		problem, ok := strictjson.Problem(err)
		if !ok {
			problem = "malformed JSON"
		}
		return fmt.Errorf("the input of tool %q is not valid: %s", name, problem)
	}
	if k := jsontext.Value(input).Kind(); k != '{' {
		return fmt.Errorf("the input of tool %q is not valid: it must be a JSON object, not %s", name, strictjson.KindName(k))
	}
	return nil
}

// inputProblem is a validation error of schema s as one line for the
// caller, in the schema's terms (schemaMessage): the validator prints a
// null value as Go's "<invalid reflect.Value>", and it quotes the value it
// refuses, which may be large.
func inputProblem(err error, s *jsonschema.Resolved) string {
	msg := schemaMessage(strings.ReplaceAll(oneLine(err.Error()), "<invalid reflect.Value>", "null"), s)
	const max = 1000
	if len(msg) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// toolEntry is a tool's compiled schema and definition hash. For a
// DefinitionChecker (changeable) they follow the tool's Definition: when it
// differs from the one they were made from, they are made again.
type toolEntry struct {
	tool       Tool
	changeable bool
	mu         sync.Mutex
	def        Definition
	hash       string
	schema     *jsonschema.Resolved
	// schemaErr is why a changed definition's schema does not compile:
	// every input is then refused with it.
	schemaErr error
}

// current returns the hash and schema of the tool's definition now.
func (e *toolEntry) current() (string, *jsonschema.Resolved, error) {
	if !e.changeable {
		return e.hash, e.schema, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if def := e.tool.Definition(); !sameGate(def, e.def) {
		e.def = def
		e.schema, e.schemaErr = compileSchema(def)
		if h, err := DefinitionHash(def); err == nil {
			e.hash = h
		} else {
			// Matches no recorded hash: a held call of it never runs.
			e.hash = "unhashable: " + err.Error()
		}
	}
	return e.hash, e.schema, e.schemaErr
}

// sameGate reports whether two definitions have the same schema, hash and
// gate (the description and the rest of what the model reads aside).
func sameGate(a, b Definition) bool {
	return a.Name == b.Name && a.Effect == b.Effect && a.Idempotent == b.Idempotent &&
		a.RequiresApproval == b.RequiresApproval && a.NoApproval == b.NoApproval && a.Client == b.Client &&
		bytes.Equal(a.InputSchema, b.InputSchema) && bytes.Equal(a.Annotations, b.Annotations)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	return strings.Join(strings.Fields(s), " ")
}

// DefinitionHash is the SHA-256 (hex) over a tool's canonical name, input
// schema, effect, approval flags, annotations and whether the caller
// executes it (Client). The description is left out, so a redeploy that
// rewords a tool does not strand waiting runs. A definition without
// NoApproval, Annotations and Client hashes as it did before those fields
// existed.
func DefinitionHash(def Definition) (string, error) {
	schema := def.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	canon, err := CanonicalJSON(schema)
	if err != nil {
		return "", fmt.Errorf("tool %q: input schema: %w", def.Name, err)
	}
	var annotations json.RawMessage
	if len(bytes.TrimSpace(def.Annotations)) > 0 {
		if annotations, err = CanonicalJSON(def.Annotations); err != nil {
			return "", fmt.Errorf("tool %q: annotations: %w", def.Name, err)
		}
	}
	doc := struct {
		Name             string          `json:"name"`
		InputSchema      json.RawMessage `json:"input_schema"`
		Effect           Effect          `json:"effect"`
		Idempotent       bool            `json:"idempotent"`
		RequiresApproval bool            `json:"requires_approval"`
		NoApproval       bool            `json:"no_approval,omitempty"`
		Annotations      json.RawMessage `json:"annotations,omitempty"`
		Client           bool            `json:"client,omitempty"`
	}{def.Name, canon, def.Effect, def.Idempotent, def.RequiresApproval, def.NoApproval, annotations, def.Client}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// errNotIJSON marks JSON CanonicalJSON refuses: malformed, or not I-JSON.
var errNotIJSON = errors.New("not I-JSON (RFC 7493)")

// CanonicalJSON re-encodes JSON with object keys sorted and no insignificant
// white space, keeping numbers exactly as written. It refuses JSON that is
// not I-JSON (strictjson.Value), whose canonical form would be one reading
// of several: {"a":1,"a":2} would become {"a":2}, the canonical form of
// another text.
func CanonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if err := strictjson.Value(raw); err != nil {
		problem, ok := strictjson.Problem(err)
		if !ok {
			problem = "malformed JSON"
		}
		return nil, fmt.Errorf("%w: %s", errNotIJSON, problem)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}

// jsonTypes are the type names of JSON Schema.
var jsonTypes = []string{"null", "boolean", "object", "array", "number", "string", "integer"}

// Keywords whose values are schemas (JSON Schema draft 2020-12 and
// draft-07): one schema, a list of them, or a map of names to them.
var (
	schemaKeywords = []string{"items", "additionalItems", "additionalProperties", "not", "if", "then", "else",
		"contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)

// checkTypeNames reports a "type" keyword of the schema raw, or of any
// schema in it (reached through the keywords that hold schemas; other
// keywords, such as enum, const, default, dependentRequired or a vendor's
// x-..., hold data and are not looked into), that is not a JSON Schema
// type name or a non-empty list of distinct ones.
func checkTypeNames(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return checkSchemaTypes(v, "")
}

func checkSchemaTypes(v any, at string) error {
	schema, ok := v.(map[string]any)
	if !ok {
		return nil // a boolean schema, or a value the compiler judges
	}
	for k, sub := range schema {
		switch {
		case k == "type":
			if err := checkTypeValue(sub, at+"/type"); err != nil {
				return err
			}
		case slices.Contains(schemaMapKeywords, k):
			if m, ok := sub.(map[string]any); ok {
				for name, s := range m {
					if err := checkSchemaTypes(s, at+"/"+k+"/"+name); err != nil {
						return err
					}
				}
			}
		case slices.Contains(schemaListKeywords, k) || slices.Contains(schemaKeywords, k):
			if list, ok := sub.([]any); ok {
				for i, s := range list {
					if err := checkSchemaTypes(s, fmt.Sprintf("%s/%s/%d", at, k, i)); err != nil {
						return err
					}
				}
			} else if err := checkSchemaTypes(sub, at+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTypeValue checks the value of a "type" keyword.
func checkTypeValue(v any, at string) error {
	var names []string
	switch t := v.(type) {
	case string:
		names = []string{t}
	case []any:
		if len(t) == 0 {
			return fmt.Errorf("%s: an empty list names no type", at)
		}
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("%s: a list of type names holds %v", at, e)
			}
			if slices.Contains(names, s) {
				return fmt.Errorf("%s: %q is listed twice", at, s)
			}
			names = append(names, s)
		}
	default:
		return fmt.Errorf("%s: must be a type name or a list of them", at)
	}
	for _, n := range names {
		if !slices.Contains(jsonTypes, n) {
			return fmt.Errorf("%s: %q is not a JSON Schema type (one of %v)", at, n, jsonTypes)
		}
	}
	return nil
}
