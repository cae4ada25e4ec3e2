package apispec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// bodySchemas checks request and response bodies against a document's
// schemas, each compiled once. openapi3filter compiles a JSON Schema
// 2020-12 validator from a body's schema (and every component it refers
// to) at each validation of an OpenAPI 3.1 document (kin-openapi v0.153.0;
// getkin/kin-openapi#1186 would cache them): a third of the CPU of the API
// suites under -race, the exchanges being checked twice (the gateway's
// side and the client's). The Validator has openapi3filter check all but
// the bodies, and checks those here the way openapi3filter does: the
// media type of the Content-Type, decoded by openapi3filter's registered
// decoder, validated by the library openapi3filter compiles with
// (santhosh-tekuri/jsonschema, draft 2020-12), asserting the formats
// kin-openapi asserts (its SchemaStringFormats, SchemaIntegerFormats and
// SchemaNumberFormats: date-time, date, byte, int32, int64 by default).
type bodySchemas struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[*openapi3.SchemaRef]*jsonschema.Schema
	added    int   // resources added for bodies (each its own URL)
	err      error // of adding the components
}

// componentsURL is where a document's components live in the compiler:
// {"components":{"schemas":...}}, so that "#/components/schemas/X" in a
// component resolves in it as in the document.
const componentsURL = "https://agentgate.invalid/components.json"

// bodiesOf keeps one bodySchemas per document (NewValidatorFor's argument;
// Current's document is shared by every Validator of a process).
var bodiesOf sync.Map // *openapi3.T -> *bodySchemas

func bodiesFor(doc *openapi3.T) *bodySchemas {
	if b, ok := bodiesOf.Load(doc); ok {
		return b.(*bodySchemas)
	}
	b := &bodySchemas{compiler: jsonschema.NewCompiler(), compiled: map[*openapi3.SchemaRef]*jsonschema.Schema{}}
	b.compiler.DefaultDraft(jsonschema.Draft2020)
	var schemas openapi3.Schemas
	if doc.Components != nil {
		schemas = doc.Components.Schemas
	}
	components, err := asJSON(map[string]any{"components": map[string]any{"schemas": schemas}})
	if err == nil {
		registerFormats(b.compiler, components)
		err = b.compiler.AddResource(componentsURL, components)
	}
	b.err = err
	actual, _ := bodiesOf.LoadOrStore(doc, b)
	return actual.(*bodySchemas)
}

// schema returns ref compiled, compiling it on first use.
func (b *bodySchemas) schema(ref *openapi3.SchemaRef) (*jsonschema.Schema, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	if s, ok := b.compiled[ref]; ok {
		return s, nil
	}
	v, err := asJSON(ref) // a reference marshals as {"$ref": ...}
	if err != nil {
		return nil, err
	}
	v = toComponents(v)
	registerFormats(b.compiler, v)
	b.added++
	url := fmt.Sprintf("https://agentgate.invalid/body/%d.json", b.added)
	if err := b.compiler.AddResource(url, v); err != nil {
		return nil, err
	}
	s, err := b.compiler.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile the schema: %w", err)
	}
	b.compiled[ref] = s
	return s, nil
}

// check validates a body sent with header against content (the request
// body's or the response's media types), as openapi3filter does:
// no content declared, or no schema for the media type, accepts any body.
func (b *bodySchemas) check(content openapi3.Content, header http.Header, body []byte) error {
	if len(content) == 0 {
		return nil
	}
	ct := header.Get("Content-Type")
	mt := content.Get(ct)
	if mt == nil {
		return fmt.Errorf("header Content-Type has unexpected value: %q", ct)
	}
	if mt.Schema == nil {
		return nil
	}
	base, _, _ := strings.Cut(ct, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	decode := openapi3filter.RegisteredBodyDecoder(base)
	if decode == nil && strings.HasSuffix(base, "+json") {
		decode = openapi3filter.JSONBodyDecoder
	}
	if decode == nil {
		return fmt.Errorf("unsupported content type %q", base)
	}
	value, err := decode(bytes.NewReader(body), header, mt.Schema, func(name string) *openapi3.Encoding { return mt.Encoding[name] })
	if err != nil {
		return fmt.Errorf("failed to decode the body: %w", err)
	}
	s, err := b.schema(mt.Schema)
	if err != nil {
		return err
	}
	if err := s.Validate(value); err != nil {
		return fmt.Errorf("body doesn't match schema%s: %w", schemaName(mt.Schema), err)
	}
	return nil
}

func schemaName(ref *openapi3.SchemaRef) string {
	if name, ok := strings.CutPrefix(ref.Ref, "#/components/schemas/"); ok {
		return " " + name
	}
	return ""
}

// asJSON returns v as JSON values (maps, slices, strings, json.Number...).
func asJSON(v any) (any, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// toComponents points the references of a body's schema to the document's
// components at componentsURL.
func toComponents(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" && strings.HasPrefix(s, "#/components/") {
				v[k] = componentsURL + s
				continue
			}
			v[k] = toComponents(e)
		}
	case []any:
		for i, e := range v {
			v[i] = toComponents(e)
		}
	}
	return v
}

// registerFormats registers with c every format the schema v names, each
// checked as kin-openapi checks it (its format maps; a format it does not
// know accepts anything), and asserts them.
func registerFormats(c *jsonschema.Compiler, v any) {
	formats := map[string]bool{}
	var collect func(any)
	collect = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if f, ok := v["format"].(string); ok && f != "" {
				formats[f] = true
			}
			for _, e := range v {
				collect(e)
			}
		case []any:
			for _, e := range v {
				collect(e)
			}
		}
	}
	collect(v)
	for f := range formats {
		c.RegisterFormat(&jsonschema.Format{Name: f, Validate: func(v any) error { return checkFormat(f, v) }})
	}
	if len(formats) > 0 {
		c.AssertFormat()
	}
}

func checkFormat(format string, v any) error {
	var n float64
	switch v := v.(type) {
	case string:
		if f, ok := openapi3.SchemaStringFormats[format]; ok {
			return f.Validate(v)
		}
		return nil
	case json.Number:
		var err error
		if n, err = strconv.ParseFloat(string(v), 64); err != nil {
			return nil
		}
	case float64:
		n = v
	default:
		return nil
	}
	if n == math.Trunc(n) && !math.IsInf(n, 0) {
		if f, ok := openapi3.SchemaIntegerFormats[format]; ok {
			return f.Validate(int64(n))
		}
	}
	if f, ok := openapi3.SchemaNumberFormats[format]; ok {
		return f.Validate(n)
	}
	return nil
}
