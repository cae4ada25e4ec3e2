package apispec_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// jsonFields returns a struct's JSON field names and whether each is left
// out when empty.
func jsonFields(typ reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
	}
	return out
}

// TestHandlerTypesMatchSpec compares the Go types the handlers decode and
// encode with the current spec (planned parts removed): the same JSON
// fields; for response types, every property the spec requires is always
// encoded. A renamed or added field fails here before it fails a validated
// suite.
func TestHandlerTypesMatchSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		schema   string
		v        any
		response bool
	}{
		{"StartRequest", service.StartRequest{}, false},
		{"Message", loop.Message{}, false},
		{"Block", loop.Block{}, false},
		{"Decision", loop.Decision{}, false},
		{"CallDecision", loop.CallDecision{}, false},
		{"Run", httpapi.RunView{}, true},
		{"Pending", httpapi.PendingView{}, true},
		{"RecordedDecision", httpapi.DecisionView{}, true},
		{"PendingCall", runs.CallSummary{}, true},
		{"UnverifiedDefinition", loop.UnverifiedDefinition{}, true},
		{"Counters", loop.Counters{}, true},
		{"Event", runs.Event{}, true},
	}
	for _, tt := range tests {
		typ := reflect.TypeOf(tt.v)
		t.Run(tt.schema+"="+typ.String(), func(t *testing.T) {
			ref := doc.Components.Schemas[tt.schema]
			if ref == nil {
				t.Fatalf("openapi.yaml has no schema %s", tt.schema)
			}
			var spec []string
			for p := range ref.Value.Properties {
				spec = append(spec, p)
			}
			slices.Sort(spec)
			fields := jsonFields(typ)
			var got []string
			for f := range fields {
				got = append(got, f)
			}
			slices.Sort(got)
			if !slices.Equal(got, spec) {
				t.Errorf("%s has JSON fields %v; openapi.yaml %s (without planned parts) has %v", typ, got, tt.schema, spec)
			}
			if !tt.response {
				return
			}
			for _, req := range ref.Value.Required {
				if fields[req] {
					t.Errorf("%s: %s is required by the spec but left out when empty", typ, req)
				}
			}
		})
	}
}
