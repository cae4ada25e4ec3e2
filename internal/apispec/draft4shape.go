package apispec

import (
	"encoding/json"
	"fmt"
)

// shapeKeywords are the keywords Draft4Shape keeps: those that say what a
// body looks like, not which values it may hold.
var shapeKeywords = map[string]bool{
	"$schema": true, "title": true, "description": true,
	"type": true, "properties": true, "additionalProperties": true, "items": true,
}

// Draft4Shape is Draft4(name) reduced to the shape of the body: JSON types,
// properties, closed objects, array items. It refuses exactly what the spec
// calls malformed (400 bad_request: a field of the wrong type, an unknown
// field, not an object) and leaves every rule on values (required, oneOf,
// enum, lengths, ranges, patterns, uniqueness) to the handler, which answers
// those with 422. It is the API Gateway request model of the component: a
// body the gateway refuses gets the status the handler would give it.
func Draft4Shape(name string) (json.RawMessage, error) {
	raw, err := Draft4(name)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return json.Marshal(shape(doc))
}

func shape(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v // additionalProperties: false
	}
	out := map[string]any{}
	for k, sv := range m {
		if !shapeKeywords[k] {
			continue
		}
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range sv.(map[string]any) {
				props[name] = shape(p)
			}
			out[k] = props
		case "items", "additionalProperties":
			out[k] = shape(sv)
		default:
			out[k] = sv
		}
	}
	return out
}
