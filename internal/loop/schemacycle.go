package loop

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// checkRefCycles refuses an input schema in which a subschema applies
// itself to the same value again through references and in-place
// applicators alone ($ref, $dynamicRef, allOf, anyOf, oneOf, not, if,
// then, else, dependentSchemas), e.g. {"$defs":{"x":{"$ref":"#/$defs/x"}}}
// under a property: validating a value against it never ends, and the
// validator's recursion overflows the goroutine's stack, which no recover
// catches (the process dies; a caller's client tool could take a server
// down). A schema that recurses through properties or items (a tree) is
// fine: each step goes one level into the value, which is finite.
//
// References must stay within the schema ("#", "#/<pointer>", "#<anchor>",
// optionally after the schema's own $id), where this check can follow
// them; the compiler already refuses the references it cannot resolve (no
// loader).
func checkRefCycles(raw json.RawMessage) error {
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return err
	}
	c := &refCycles{root: root, anchors: map[string][]string{}, state: map[string]int{}}
	c.collect("", root)
	sort.Strings(c.schemas)
	for _, p := range c.schemas {
		if err := c.visit(p, c.at(p)); err != nil {
			return err
		}
	}
	return nil
}

type refCycles struct {
	root any
	// schemas are the pointers of every schema position; anchors map
	// $anchor and $dynamicAnchor names to the pointers that declare them.
	schemas []string
	anchors map[string][]string
	// state: 1 while a schema is on the path being followed, 2 once all
	// it applies in place was followed without a cycle.
	state map[string]int
}

// Keywords whose value is one schema, an array of schemas, or an object
// of schemas; the in-place ones apply to the value the schema applies to.
var (
	oneSchemaKeywords   = []string{"not", "if", "then", "else", "additionalProperties", "propertyNames", "contains", "items", "additionalItems", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	arraySchemaKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	mapSchemaKeywords   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
	inPlaceOne          = []string{"not", "if", "then", "else"}
	inPlaceArray        = []string{"allOf", "anyOf", "oneOf"}
)

// collect records the schema at pointer p and every schema under it.
func (c *refCycles) collect(p string, node any) {
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	c.schemas = append(c.schemas, p)
	for _, k := range []string{"$anchor", "$dynamicAnchor"} {
		if name, ok := m[k].(string); ok {
			c.anchors[name] = append(c.anchors[name], p)
		}
	}
	for _, k := range oneSchemaKeywords {
		if _, ok := m[k].(map[string]any); ok {
			c.collect(p+"/"+escapePointer(k), m[k])
		}
	}
	for _, k := range arraySchemaKeywords {
		if a, ok := m[k].([]any); ok {
			for i, v := range a {
				c.collect(p+"/"+k+"/"+strconv.Itoa(i), v)
			}
		}
	}
	for _, k := range mapSchemaKeywords {
		if o, ok := m[k].(map[string]any); ok {
			for name, v := range o {
				c.collect(p+"/"+escapePointer(k)+"/"+escapePointer(name), v)
			}
		}
	}
}

// visit follows what the schema at pointer p applies in place.
func (c *refCycles) visit(p string, node any) error {
	switch c.state[p] {
	case 1:
		return fmt.Errorf("the schema at %q refers back to itself through $ref or in-place keywords (allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) without going into the value: validating against it would never end", "#"+p)
	case 2:
		return nil
	}
	m, ok := node.(map[string]any)
	if !ok {
		c.state[p] = 2
		return nil
	}
	c.state[p] = 1
	var next []string
	for _, k := range []string{"$ref", "$dynamicRef"} {
		ref, ok := m[k].(string)
		if !ok {
			continue
		}
		targets, err := c.resolve(ref)
		if err != nil {
			return fmt.Errorf("%s %q at %q: %w", k, ref, "#"+p, err)
		}
		next = append(next, targets...)
	}
	for _, k := range inPlaceOne {
		if _, ok := m[k].(map[string]any); ok {
			next = append(next, p+"/"+k)
		}
	}
	for _, k := range inPlaceArray {
		if a, ok := m[k].([]any); ok {
			for i := range a {
				next = append(next, p+"/"+k+"/"+strconv.Itoa(i))
			}
		}
	}
	if o, ok := m["dependentSchemas"].(map[string]any); ok {
		for name := range o {
			next = append(next, p+"/dependentSchemas/"+escapePointer(name))
		}
	}
	sort.Strings(next)
	for _, q := range next {
		if err := c.visit(q, c.at(q)); err != nil {
			return err
		}
	}
	c.state[p] = 2
	return nil
}

// resolve returns the pointers a reference within the schema names.
func (c *refCycles) resolve(ref string) ([]string, error) {
	if root, ok := c.root.(map[string]any); ok {
		// The schema's own $id before the fragment names the schema too.
		if id, ok := root["$id"].(string); ok && id != "" {
			if rest, ok := strings.CutPrefix(ref, strings.TrimSuffix(id, "#")); ok && (rest == "" || rest[0] == '#') {
				ref = "#" + strings.TrimPrefix(rest, "#")
			}
		}
	}
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf(`only references within the schema ("#", "#/<pointer>", "#<anchor>") are supported`)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, fmt.Errorf("not a valid fragment: %w", err)
	}
	if frag == "" || strings.HasPrefix(frag, "/") {
		if c.at(frag) == nil {
			return nil, fmt.Errorf("names nothing in the schema")
		}
		return []string{frag}, nil
	}
	if ps := c.anchors[frag]; len(ps) > 0 {
		return ps, nil
	}
	return nil, fmt.Errorf("names no anchor of the schema")
}

// at returns the value at JSON pointer p of the schema (nil: none).
func (c *refCycles) at(p string) any {
	node := c.root
	if p == "" {
		return node
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := node.(type) {
		case map[string]any:
			node = v[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			node = v[i]
		default:
			return nil
		}
	}
	return node
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
