package apispec

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"go.yaml.in/yaml/v4"

	"github.com/agentgate/agentgate"
)

// Draft4SchemaURI is the $schema of the documents Draft4 returns.
const Draft4SchemaURI = "http://json-schema.org/draft-04/schema#"

var currentTree = sync.OnceValues(func() (map[string]any, error) {
	var tree any
	if err := yaml.Unmarshal(agentgate.OpenAPI, &tree); err != nil {
		return nil, fmt.Errorf("parse spec: %w", err)
	}
	tree = stripPlanned(tree)
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec is not a YAML mapping")
	}
	return root, nil
})

// Draft4 returns the named component schema of the current spec (planned
// parts removed) as one self-contained JSON Schema draft 4 document, the
// dialect of API Gateway request models: every $ref is inlined, const
// becomes a one-value enum, and OpenAPI-only keywords (examples,
// extensions, readOnly...) are dropped. It fails on a schema that draft 4
// cannot say.
func Draft4(name string) (json.RawMessage, error) {
	root, err := currentTree()
	if err != nil {
		return nil, err
	}
	schemas, _ := dig(root, "components", "schemas").(map[string]any)
	s, ok := schemas[name]
	if !ok {
		return nil, fmt.Errorf("openapi.yaml has no component schema %q", name)
	}
	out, err := toDraft4(root, s, map[string]bool{name: true})
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema %s is not an object", name)
	}
	m["$schema"] = Draft4SchemaURI
	if _, ok := m["title"]; !ok {
		m["title"] = name
	}
	return json.Marshal(m)
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// draft4Keywords are the JSON Schema keywords kept (everything else, such
// as example, examples, deprecated, readOnly, x-*, is dropped).
var draft4Keywords = map[string]bool{
	"title": true, "description": true, "default": true, "type": true, "enum": true, "format": true,
	"multipleOf": true, "maximum": true, "minimum": true, "maxLength": true, "minLength": true, "pattern": true,
	"items": true, "additionalItems": true, "maxItems": true, "minItems": true, "uniqueItems": true,
	"maxProperties": true, "minProperties": true, "required": true, "properties": true,
	"patternProperties": true, "additionalProperties": true, "dependencies": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true,
}

// notDraft4 are 2020-12 keywords draft 4 cannot express.
var notDraft4 = []string{"prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentSchemas",
	"dependentRequired", "if", "then", "else", "contains", "propertyNames", "$defs", "exclusiveMinimum", "exclusiveMaximum"}

func toDraft4(root map[string]any, v any, seen map[string]bool) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		if b, ok := v.(bool); ok {
			if b {
				return map[string]any{}, nil
			}
			return map[string]any{"not": map[string]any{}}, nil
		}
		return nil, fmt.Errorf("a schema is %T, not an object", v)
	}
	if ref, ok := m["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		if !ok {
			return nil, fmt.Errorf("$ref %q is not a component schema", ref)
		}
		if seen[name] {
			return nil, fmt.Errorf("$ref %q is recursive; draft 4 models cannot inline it", ref)
		}
		target := dig(root, "components", "schemas", name)
		if target == nil {
			return nil, fmt.Errorf("$ref %q names no schema", ref)
		}
		next := map[string]bool{name: true}
		for k := range seen {
			next[k] = true
		}
		inlined, err := toDraft4(root, target, next)
		if err != nil {
			return nil, err
		}
		// Keywords beside the $ref apply too (OpenAPI 3.1): the referenced
		// schema's, then the sibling ones (a description overrides).
		im := inlined.(map[string]any)
		for k, sv := range m {
			if k == "$ref" || !draft4Keywords[k] {
				continue
			}
			conv, err := convertKeyword(root, k, sv, seen)
			if err != nil {
				return nil, err
			}
			im[k] = conv
		}
		return im, nil
	}
	for _, k := range notDraft4 {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("keyword %q has no draft 4 form", k)
		}
	}
	out := map[string]any{}
	for k, sv := range m {
		if k == "const" {
			out["enum"] = []any{sv}
			continue
		}
		if !draft4Keywords[k] {
			continue
		}
		conv, err := convertKeyword(root, k, sv, seen)
		if err != nil {
			return nil, err
		}
		out[k] = conv
	}
	return out, nil
}

func convertKeyword(root map[string]any, k string, v any, seen map[string]bool) (any, error) {
	switch k {
	case "properties", "patternProperties":
		props, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", k)
		}
		out := map[string]any{}
		for name, p := range props {
			c, err := toDraft4(root, p, seen)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", k, name, err)
			}
			out[name] = c
		}
		return out, nil
	case "items", "not":
		return toDraft4(root, v, seen)
	case "additionalProperties", "additionalItems":
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return toDraft4(root, v, seen)
	case "allOf", "anyOf", "oneOf":
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s is not a list", k)
		}
		out := make([]any, len(list))
		for i, s := range list {
			c, err := toDraft4(root, s, seen)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", k, i, err)
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}
