package loop

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// checkRefCycles refuses an input schema in which a subschema applies
// itself to the same value again through references and in-place
// applicators alone ($ref, $dynamicRef, allOf, anyOf, oneOf, not, if,
// then, else, dependentSchemas, draft-07 dependencies), e.g.
// {"$defs":{"x":{"$ref":"#/$defs/x"}}} under a property: validating a value
// against it never ends, and the validator's recursion overflows the
// goroutine's stack, which no recover catches (the process dies; a
// caller's client tool could take a server down). A schema that recurses
// through properties or items (a tree) is fine: each step goes one level
// into the value, which is finite. It also refuses a schema that applies
// more than maxInPlacePaths subschemas to one value (allOf or anyOf
// fanning out level after level: exponential work per value).
//
// s is the schema as the validator decoded it (keys matched as its
// decoder matched them, duplicates resolved as it resolved them), encoded
// again. References must stay within the schema ("#", "#/<pointer>",
// "#<anchor>", optionally after the root's $id); $id is taken on the root
// only, so "#" means the same everywhere.
func checkRefCycles(s *jsonschema.Schema) error {
	canon, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var root any
	if err := json.Unmarshal(canon, &root); err != nil {
		return err
	}
	c := &refCycles{root: root, anchors: map[string][]string{}, state: map[string]int{}, edges: map[string][]string{}}
	if err := c.collect("", root); err != nil {
		return err
	}
	sort.Strings(c.schemas)
	for _, p := range c.schemas {
		if err := c.visit(p, c.at(p)); err != nil {
			return err
		}
	}
	paths := map[string]int{}
	for _, p := range c.schemas {
		if n := c.paths(p, paths); n > maxInPlacePaths {
			return fmt.Errorf("the schema at %q applies more than %d subschemas to one value (allOf, anyOf, oneOf or $ref fanning out level after level)", "#"+p, maxInPlacePaths)
		}
	}
	return nil
}

// maxInPlacePaths bounds the subschemas one value is checked against
// through in-place keywords: far above any real tool's, far below what
// would keep a validation busy for seconds.
const maxInPlacePaths = 10000

// maxSchemaDepth bounds how deeply a tool's input schema nests (arrays and
// objects): a real schema nests a few levels per level of its value, and
// resolving or checking one nested thousands deep costs seconds.
const maxSchemaDepth = 128

// jsonDepth returns how deeply raw (valid JSON) nests arrays and objects.
func jsonDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range raw {
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString && b == '"':
			inString = false
		case inString:
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	return deepest
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
	// edges are what each schema applies in place (visit).
	edges map[string][]string
}

// The keywords that apply their schemas to the value the schema applies
// to (the rest of schemaKeywords, schemaListKeywords and schemaMapKeywords,
// tool.go, go into a part of it).
var (
	inPlaceOne   = []string{"not", "if", "then", "else"}
	inPlaceArray = []string{"allOf", "anyOf", "oneOf"}
)

// collect records the schema at pointer p and every schema under it.
func (c *refCycles) collect(p string, node any) error {
	m, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	if _, ok := m["$id"]; ok && p != "" {
		return fmt.Errorf("$id at %q: $id is taken on the root schema only", "#"+p)
	}
	c.schemas = append(c.schemas, p)
	for _, k := range []string{"$anchor", "$dynamicAnchor"} {
		if name, ok := m[k].(string); ok {
			c.anchors[name] = append(c.anchors[name], p)
		}
	}
	for _, k := range schemaKeywords {
		if _, ok := m[k].(map[string]any); ok {
			if err := c.collect(p+"/"+escapePointer(k), m[k]); err != nil {
				return err
			}
		}
	}
	for _, k := range schemaListKeywords {
		if a, ok := m[k].([]any); ok {
			for i, v := range a {
				if err := c.collect(p+"/"+k+"/"+strconv.Itoa(i), v); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if o, ok := m[k].(map[string]any); ok {
			for name, v := range o {
				if err := c.collect(p+"/"+escapePointer(k)+"/"+escapePointer(name), v); err != nil {
					return err
				}
			}
		}
	}
	return nil
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
	for _, k := range []string{"dependentSchemas", "dependencies"} {
		if o, ok := m[k].(map[string]any); ok {
			for name, v := range o {
				if _, ok := v.(map[string]any); ok { // draft-07: a schema, or a list of names
					next = append(next, p+"/"+k+"/"+escapePointer(name))
				}
			}
		}
	}
	sort.Strings(next)
	c.edges[p] = next
	for _, q := range next {
		if err := c.visit(q, c.at(q)); err != nil {
			return err
		}
	}
	c.state[p] = 2
	return nil
}

// paths counts the subschemas the schema at p applies to one value, itself
// included, through what it applies in place (a DAG once visit found no
// cycle), saturating above maxInPlacePaths.
func (c *refCycles) paths(p string, memo map[string]int) int {
	if n, ok := memo[p]; ok {
		return n
	}
	n := 1
	for _, q := range c.edges[p] {
		n += c.paths(q, memo)
		if n > maxInPlacePaths {
			n = maxInPlacePaths + 1
			break
		}
	}
	memo[p] = n
	return n
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
