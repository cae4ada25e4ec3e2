package requestschema

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/service"
)

// Schema is a JSON schema (draft 4, the dialect of API Gateway models) held
// as plain JSON values: it marshals to the schema document.
type Schema = map[string]any

// Draft4 is the $schema of every document this package returns.
const Draft4 = "http://json-schema.org/draft-04/schema#"

// Body is a request body the API validates: the route it belongs to and the
// Go type its handler decodes it into.
type Body struct {
	// Method and Path name the route, as in the API's route table.
	Method, Path string
	// Name names the schema (an API Gateway model name: letters and digits).
	Name string
	// Type is the type the handler decodes the body into.
	Type reflect.Type
}

// Bodies are the JSON request bodies of the API. The approval routes take
// an HTML form, which has no JSON schema.
var Bodies = []Body{
	{Method: "POST", Path: "/runs", Name: "StartRun", Type: reflect.TypeFor[service.StartRequest]()},
	{Method: "POST", Path: "/runs/{id}/decision", Name: "Decision", Type: reflect.TypeFor[loop.Decision]()},
}

// Document is the schema of b as a standalone document ($schema and title
// set).
func (b Body) Document() Schema {
	s := Of(b.Type)
	s["$schema"] = Draft4
	s["title"] = b.Name
	return s
}

// Of is the schema of the JSON values that encoding/json, with
// DisallowUnknownFields, decodes into a value of type t without error: the
// JSON type of each field, nested objects closed to unknown fields, and null
// wherever the decoder accepts it (everywhere: it leaves the Go value as it
// is). A type with its own UnmarshalJSON accepts any value, so that the
// schema is never stricter than the decoder.
func Of(t reflect.Type) Schema {
	return of(t, map[reflect.Type]bool{})
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func nullable(types ...string) []any {
	out := make([]any, 0, len(types)+1)
	for _, t := range types {
		out = append(out, t)
	}
	return append(out, "null")
}

func of(t reflect.Type, visiting map[reflect.Type]bool) Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	switch {
	case t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler):
		return Schema{}
	case t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler):
		return Schema{"type": nullable("string")}
	}
	switch t.Kind() {
	case reflect.Bool:
		return Schema{"type": nullable("boolean")}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Schema{"type": nullable("integer")}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Schema{"type": nullable("integer"), "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": nullable("number")}
	case reflect.String:
		return Schema{"type": nullable("string")}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(jsonUnmarshaler) {
			return Schema{"type": nullable("string")} // base64
		}
		return Schema{"type": nullable("array"), "items": of(t.Elem(), visiting)}
	case reflect.Array:
		return Schema{"type": nullable("array"), "items": of(t.Elem(), visiting)}
	case reflect.Map:
		return Schema{"type": nullable("object"), "additionalProperties": of(t.Elem(), visiting)}
	case reflect.Struct:
		if visiting[t] {
			return Schema{} // a recursive type: described once, accepted below
		}
		visiting[t] = true
		defer delete(visiting, t)
		props := Schema{}
		addFields(t, props, visiting)
		return Schema{"type": nullable("object"), "properties": props, "additionalProperties": false}
	}
	return Schema{} // interface{} and anything the decoder takes as is
}

// addFields adds the JSON fields of struct type t to props, promoting the
// fields of untagged embedded structs as encoding/json does.
func addFields(t reflect.Type, props Schema, visiting map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(ft, props, visiting)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := of(f.Type, visiting)
		if hasOption(opts, "string") {
			switch ft.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.String:
				s = Schema{"type": nullable("string")}
			}
		}
		props[name] = s
	}
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}
