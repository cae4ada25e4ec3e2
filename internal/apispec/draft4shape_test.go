package apispec_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentgate/agentgate/internal/apispec"
)

func compileDraft4(t *testing.T, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("model.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("model.json")
	if err != nil {
		t.Fatalf("does not compile: %v\n%s", err, raw)
	}
	return s
}

// The shape model is never stricter than the spec, and still refuses what
// the spec calls malformed.
func TestDraft4ShapeIsTheMalformedPartOfTheSpec(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	samples := map[string]struct{ specValid, malformed, semantic []string }{
		"StartRequest": {
			specValid: []string{
				`{"prompt":"x","approvers":["bob"]}`,
				`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"approvers":["bob"],"metadata":{"k":"v"}}`,
			},
			malformed: []string{`{"prompt":1,"approvers":["bob"]}`, `{"prompt":"x","approvers":"bob"}`,
				`{"prompt":"x","approvers":["bob"],"colour":"red"}`, `{"prompt":"x","approvers":["bob"],"metadata":{"k":1}}`, `[]`},
			semantic: []string{`{"prompt":"x"}`, `{"prompt":"x","approvers":[]}`, `{"approvers":["bob"]}`,
				`{"prompt":"x","approvers":["bob"],"max_iterations":201}`, `{"prompt":"x","approvers":["has space"]}`,
				// Duplicates are a value rule: the handler answers 422
				// naming the duplicate; the gateway's model lets them by.
				`{"prompt":"x","approvers":["bob","bob"]}`,
				`{"prompt":"x","approvers":["bob"],"webhook_url":"https://h.example.com/","webhook_events":["run.completed","run.completed"]}`},
		},
		"Decision": {
			specValid: []string{`{"turn_digest":"` + digest + `","action":"approve"}`,
				`{"turn_digest":"` + digest + `","calls":[{"call_id":"a","action":"edit","input":{"x":1}}]}`},
			malformed: []string{`{"turn_digest":1,"action":"approve"}`, `{"turn_digest":"` + digest + `","calls":{}}`,
				`{"turn_digest":"` + digest + `","action":"approve","remember":true}`},
			semantic: []string{`{"turn_digest":"short","action":"approve"}`, `{"action":"approve"}`,
				`{"turn_digest":"` + digest + `","action":"edit"}`, `{"turn_digest":"` + digest + `"}`},
		},
	}
	for name, s := range samples {
		t.Run(name, func(t *testing.T) {
			full, err := apispec.Draft4(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := apispec.Draft4Shape(name)
			if err != nil {
				t.Fatal(err)
			}
			spec, model := compileDraft4(t, full), compileDraft4(t, raw)
			judge := func(sch *jsonschema.Schema, body string) error {
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				return sch.Validate(v)
			}
			for _, b := range s.specValid {
				if judge(spec, b) != nil || judge(model, b) != nil {
					t.Errorf("%s: spec %v, shape model %v; want both to accept", b, judge(spec, b), judge(model, b))
				}
			}
			for _, b := range s.malformed {
				if judge(model, b) == nil {
					t.Errorf("the shape model accepts malformed %s", b)
				}
			}
			for _, b := range s.semantic {
				if judge(spec, b) == nil {
					t.Errorf("sample %s is valid in the spec; it tests nothing", b)
				}
				if err := judge(model, b); err != nil {
					t.Errorf("the shape model refuses %s (a 422 for the handler): %v", b, err)
				}
			}
		})
	}
}
