package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// Limits on a run's client tools and their results (issue #13); the README
// lists them. Counts and sizes over them are 413, other invalid values 422.
const (
	// MaxClientTools bounds a run's client tools.
	MaxClientTools = 64
	// MaxClientToolName bounds a client tool's name (the rule OpenAI,
	// Bedrock and Anthropic share: ^[A-Za-z0-9_-]{1,64}$).
	MaxClientToolName = 64
	// MaxClientToolDescription bounds a client tool's description.
	MaxClientToolDescription = 4 << 10
	// MaxClientToolSchema bounds a client tool's input schema (JSON).
	MaxClientToolSchema = 16 << 10
	// MaxToolExecutors bounds the entries (principals and groups) naming
	// who besides the initiator may submit results.
	MaxToolExecutors = runs.MaxApprovers
	// MinToolResultsTTL, MaxToolResultsTTL and DefaultToolResultsTTL bound
	// how long a caller has to submit the results of handed-over calls.
	MinToolResultsTTL     = 10 * time.Second
	MaxToolResultsTTL     = 7 * 24 * time.Hour
	DefaultToolResultsTTL = time.Hour
)

// ClientToolSpec is one client tool of a start request: a tool the caller
// executes itself, offered to the model and gated like any tool.
type ClientToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Effect      loop.Effect     `json:"effect"`
	// RequiresApproval asks for approval of a read too (a write always
	// needs it).
	RequiresApproval bool `json:"requires_approval,omitempty"`
}

// Definition returns the loop's definition of the client tool.
func (c ClientToolSpec) Definition() loop.Definition {
	return loop.Definition{
		Name: c.Name, Description: c.Description, InputSchema: c.InputSchema,
		Effect: c.Effect, RequiresApproval: c.RequiresApproval, Client: true,
	}
}

// validateClientTools checks the request's client tools, tool executors and
// results window against the deployment's tools; it returns the run's
// toolbox (tools with the client tools added).
func (r *StartRequest) validateClientTools(tools *loop.Toolbox) (*loop.Toolbox, error) {
	switch {
	case len(r.ClientTools) > MaxClientTools:
		return nil, runs.Errorf(runs.ETooLarge, "client_tools: %d given, at most %d allowed", len(r.ClientTools), MaxClientTools)
	case len(r.ToolExecutors) > MaxToolExecutors:
		return nil, runs.Errorf(runs.ETooLarge, "tool_executors: %d listed, at most %d allowed", len(r.ToolExecutors), MaxToolExecutors)
	}
	seen := map[string]bool{}
	for i, c := range r.ClientTools {
		switch {
		case len(c.Description) > MaxClientToolDescription:
			return nil, runs.Errorf(runs.ETooLarge, "client_tools[%d]: description is %d bytes, at most %d allowed", i, len(c.Description), MaxClientToolDescription)
		case len(c.InputSchema) > MaxClientToolSchema:
			return nil, runs.Errorf(runs.ETooLarge, "client_tools[%d]: input_schema is %d bytes, at most %d allowed", i, len(c.InputSchema), MaxClientToolSchema)
		}
		if err := checkClientToolName(c.Name); err != nil {
			return nil, runs.Errorf(runs.EInvalid, "client_tools[%d]: %v", i, err)
		}
		if seen[c.Name] {
			return nil, runs.Errorf(runs.EInvalid, "client_tools[%d]: %q is declared twice", i, c.Name)
		}
		seen[c.Name] = true
		if _, ok := tools.Lookup(c.Name); ok {
			return nil, runs.Errorf(runs.EInvalid, "client_tools[%d]: %q is the name of a tool of this deployment", i, c.Name)
		}
		if c.Effect != loop.EffectRead && c.Effect != loop.EffectWrite {
			return nil, runs.Errorf(runs.EInvalid, "client_tools[%d]: effect must be %q or %q", i, loop.EffectRead, loop.EffectWrite)
		}
		if err := checkObjectSchema(c.InputSchema); err != nil {
			return nil, runs.Errorf(runs.EInvalid, "client_tools[%d]: input_schema %v", i, err)
		}
	}
	tb, err := r.Toolbox(tools)
	if err != nil {
		return nil, runs.Errorf(runs.EInvalid, "client_tools: %v", err)
	}
	executors, groups := map[string]bool{}, map[string]bool{}
	for i, e := range r.ToolExecutors {
		if name, ok := strings.CutPrefix(e, identity.GroupPrefix); ok {
			// Whether the directory has the group is the API's check
			// (it holds the directory); here only its form and repeats.
			if name == "" {
				return nil, runs.Errorf(runs.EInvalid, "tool_executors[%d]: %q names no group (group:<name>)", i, e)
			}
			if groups[name] {
				return nil, runs.Errorf(runs.EInvalid, "tool_executors[%d]: %q is listed twice", i, e)
			}
			groups[name] = true
			continue
		}
		if err := validPrincipal(e); err != nil {
			return nil, runs.Errorf(runs.EInvalid, "tool_executors[%d]: %v", i, err)
		}
		p, err := identity.Parse(e)
		if err != nil {
			return nil, runs.Errorf(runs.EInvalid, "tool_executors[%d]: %q is not an e-mail address, IAM user or role ARN, or local name", i, e)
		}
		if p.IsSession() {
			// As for approvers: a session's key is its role's, so naming
			// one would let every session of the role submit.
			return nil, runs.Errorf(runs.EInvalid, "tool_executors[%d]: %q: every session of a role is the same principal; name the role ARN instead", i, e)
		}
		if executors[p.Key()] {
			return nil, runs.Errorf(runs.EInvalid, "tool_executors[%d]: %q is listed twice", i, e)
		}
		executors[p.Key()] = true
	}
	if s := r.ToolResultsTTLSeconds; s != 0 && (s < int64(MinToolResultsTTL/time.Second) || s > int64(MaxToolResultsTTL/time.Second)) {
		// Compared in seconds: converting first could overflow.
		return nil, runs.Errorf(runs.EInvalid, "tool_results_ttl_seconds must be between %d and %d", int(MinToolResultsTTL.Seconds()), int(MaxToolResultsTTL.Seconds()))
	}
	if len(r.ClientTools) == 0 && (len(r.ToolExecutors) > 0 || r.ToolResultsTTLSeconds != 0) {
		return nil, runs.Errorf(runs.EInvalid, "tool_executors and tool_results_ttl_seconds need client_tools")
	}
	return tb, nil
}

// checkClientToolName applies the providers' common tool-name rule and
// keeps "__" for the deployment's MCP tools (<server>__<tool>).
func checkClientToolName(name string) error {
	if name == "" || len(name) > MaxClientToolName {
		return fmt.Errorf("name must be 1 to %d characters", MaxClientToolName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name %q may hold only letters, digits, '_' and '-'", name)
		}
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("name %q contains \"__\", which names the tools of MCP servers (<server>__<tool>)", name)
	}
	return nil
}

// checkObjectSchema requires a JSON object whose "type", if given, is
// "object": the models take tool input as an object. Whether it compiles
// is checked when the toolbox is built.
func checkObjectSchema(raw json.RawMessage) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return fmt.Errorf("is required")
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("must be a JSON object")
	}
	if t, ok := doc["type"]; ok && string(bytes.TrimSpace(t)) != `"object"` {
		return fmt.Errorf(`must describe an object ("type": "object")`)
	}
	return nil
}

// Toolbox returns the run's toolbox: tools, with the request's client
// tools added (tools itself when there are none).
func (r *StartRequest) Toolbox(tools *loop.Toolbox) (*loop.Toolbox, error) {
	if len(r.ClientTools) == 0 {
		return tools, nil
	}
	ts := make([]loop.Tool, len(r.ClientTools))
	for i, c := range r.ClientTools {
		ts[i] = loop.NewClientTool(c.Definition())
	}
	return tools.With(ts...)
}

// RunToolbox returns the toolbox of a stored run: tools with the client
// tools of its stored request. A request that cannot be read, or whose
// client tools no longer fit tools, is an error.
func RunToolbox(tools *loop.Toolbox, r *runs.Run) (*loop.Toolbox, error) {
	var req StartRequest
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return nil, fmt.Errorf("the stored request of run %s cannot be read", r.ID)
	}
	return req.Toolbox(tools)
}

// ToolResultsTTL returns the request's results window or def.
func (r *StartRequest) ToolResultsTTL(def time.Duration) time.Duration {
	if s := r.ToolResultsTTLSeconds; s >= int64(MinToolResultsTTL/time.Second) && s <= int64(MaxToolResultsTTL/time.Second) {
		return time.Duration(s) * time.Second
	}
	return def
}
