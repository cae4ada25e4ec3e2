package apispec

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"github.com/agentgate/agentgate"
)

// The extensions openapi.yaml uses beyond OpenAPI.
const (
	// ExtStatus marks an operation or a property; its one value is
	// StatusPlanned: the part is the contract of an open issue and no server
	// implements it yet.
	ExtStatus     = "x-agentgate-status"
	StatusPlanned = "planned"
	// ExtPlannedValues lists the values of a schema's enum that no server
	// produces or accepts yet.
	ExtPlannedValues = "x-agentgate-planned-values"
	// ExtLocalOnly marks an operation that only the local server
	// (agentgate serve) answers, not the deployed REST API.
	ExtLocalOnly = "x-agentgate-local-only"
)

var (
	full    = sync.OnceValues(func() (*openapi3.T, error) { return Load(agentgate.OpenAPI, false) })
	current = sync.OnceValues(func() (*openapi3.T, error) { return Load(agentgate.OpenAPI, true) })
)

// Full returns openapi.yaml loaded and validated, planned parts included.
// The document is shared: do not modify it.
func Full() (*openapi3.T, error) { return full() }

// Current returns openapi.yaml without its planned parts: the API servers
// implement today. The document is shared: do not modify it.
func Current() (*openapi3.T, error) { return current() }

// Load parses and validates an OpenAPI document (YAML or JSON). With
// withoutPlanned, every operation and property marked planned is removed
// (with the property's entry in "required"), every value listed in
// x-agentgate-planned-values is removed from its enum, and a path left
// without operations is removed.
func Load(raw []byte, withoutPlanned bool) (*openapi3.T, error) {
	var tree any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		return nil, fmt.Errorf("parse spec: %w", err)
	}
	if withoutPlanned {
		tree = stripPlanned(tree)
		if root, ok := tree.(map[string]any); ok {
			dropEmptyPaths(root)
		}
	}
	js, err := json.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("spec to JSON: %w", err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(js)
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableMultiError()); err != nil {
		return nil, fmt.Errorf("spec is not valid OpenAPI: %w", err)
	}
	return doc, nil
}

func planned(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m[ExtStatus] == StatusPlanned
}

// stripPlanned removes planned parts from a decoded YAML tree, anywhere.
func stripPlanned(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for name, p := range props {
				if planned(p) {
					delete(props, name)
					v["required"] = without(v["required"], name)
				}
			}
		}
		if vals, ok := v[ExtPlannedValues].([]any); ok {
			for _, val := range vals {
				v["enum"] = without(v["enum"], val)
			}
			delete(v, ExtPlannedValues)
		}
		for k, child := range v {
			if planned(child) {
				delete(v, k)
				continue
			}
			v[k] = stripPlanned(child)
		}
		return v
	case []any:
		out := v[:0]
		for _, child := range v {
			if !planned(child) {
				out = append(out, stripPlanned(child))
			}
		}
		return out
	}
	return v
}

func without(list any, val any) any {
	l, ok := list.([]any)
	if !ok {
		return list
	}
	out := make([]any, 0, len(l))
	for _, x := range l {
		if x != val {
			out = append(out, x)
		}
	}
	return out
}

// methods are the operation keys of a path item, in OpenAPI's order.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func dropEmptyPaths(root map[string]any) {
	paths, ok := root["paths"].(map[string]any)
	if !ok {
		return
	}
	for p, item := range paths {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(methods, func(k string) bool { _, ok := m[k]; return ok }) {
			delete(paths, p)
		}
	}
}

// Operation is one method of one path in the spec.
type Operation struct {
	// Method is upper case (GET, POST...); Path is the template
	// (/runs/{id}).
	Method, Path string
	// ID is the operationId.
	ID string
	// Planned: marked x-agentgate-status: planned.
	Planned bool
	// LocalOnly: marked x-agentgate-local-only (not on the deployed API).
	LocalOnly bool
	// Authenticated: callers must sign (SigV4) or send a bearer token.
	Authenticated bool
	// Statuses are the response statuses the operation declares, sorted.
	Statuses []int
}

// Operations lists the operations of doc sorted by path, then method.
func Operations(doc *openapi3.T) []Operation {
	var ops []Operation
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			o := Operation{
				Method: method, Path: path, ID: op.OperationID,
				Planned:   op.Extensions[ExtStatus] == StatusPlanned,
				LocalOnly: op.Extensions[ExtLocalOnly] == true,
			}
			sec := doc.Security
			if op.Security != nil {
				sec = *op.Security
			}
			o.Authenticated = len(sec) > 0
			for code := range op.Responses.Map() {
				if n, err := strconv.Atoi(code); err == nil {
					o.Statuses = append(o.Statuses, n)
				}
			}
			slices.Sort(o.Statuses)
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return ops
}

// String is "METHOD /path".
func (o Operation) String() string { return o.Method + " " + o.Path }

// statusText is "404 Not Found".
func statusText(code int) string { return strconv.Itoa(code) + " " + http.StatusText(code) }
