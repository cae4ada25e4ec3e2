package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// template is the CloudFormation template the stack was deployed from.
type template struct {
	Resources map[string]struct {
		Type       string         `json:"Type"`
		Properties map[string]any `json:"Properties"`
	} `json:"Resources"`
}

func parseTemplate(body string) (*template, error) {
	var t template
	if err := json.Unmarshal([]byte(body), &t); err != nil {
		return nil, fmt.Errorf("parse deployed template: %w", err)
	}
	return &t, nil
}

// props returns the properties of the resource with logical id id.
func (t *template) props(id string) map[string]any {
	return t.Resources[id].Properties
}

// only returns the logical id and properties of the single resource of typ.
func (t *template) only(typ string) (string, map[string]any, error) {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		return "", nil, fmt.Errorf("%d resources of type %s in the template", len(ids), typ)
	}
	return ids[0], t.Resources[ids[0]].Properties, nil
}

// at walks v along path (map keys, or "[i]" list indexes written as ints).
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// flat renders a template value compactly: strings as is, {Ref: X} as
// ${X}, lists joined with ",", maps as sorted k=v pairs.
func flat(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = flat(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if r, ok := x["Ref"]; ok {
			return "${" + flat(r) + "}"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + flat(x[k])
		}
		return "{" + strings.Join(parts, " ") + "}"
	default:
		return fmt.Sprint(x)
	}
}
