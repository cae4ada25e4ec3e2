package apispec_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentgate/agentgate/internal/apispec"
)

// TestDraft4AgreesWithSpec compiles the draft-4 exports API Gateway gets
// as request models and checks they judge sample bodies exactly as the
// spec does.
func TestDraft4AgreesWithSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	digest := strings.Repeat("ab", 32)
	samples := map[string][]string{
		"StartRequest": {
			`{"prompt":"x","approvers":["bob"]}`,
			`{"prompt":"x","approvers":["bob","ops@example.com"],"approval_ttl_seconds":3600,"four_eyes":true,"metadata":{"k":"v"},"allowed_tools":["read_document"]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"approvers":["bob"]}`,
			`{"prompt":"x"}`,
			`{"prompt":"x","approvers":[]}`,
			`{"prompt":"x","approvers":["bob","bob"]}`,
			`{"prompt":"x","approvers":["bob"],"webhook_url":"https://h.example.com/","webhook_events":["run.completed","run.failed"]}`,
			`{"prompt":"x","approvers":["bob"],"webhook_url":"https://h.example.com/","webhook_events":["run.completed","run.completed"]}`,
			`{"prompt":"x","approvers":["has space"]}`,
			`{"prompt":"x","messages":[{"role":"user","content":[]}],"approvers":["bob"]}`,
			`{"approvers":["bob"]}`,
			`{"prompt":"x","approvers":["bob"],"colour":"red"}`,
			`{"prompt":"x","approvers":["bob"],"tool_results_ttl_seconds":60}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":9999999}`,
			// The windows' ranges: 0 (the default), or 60 (10) to 604800.
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":0}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":59}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":60}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":604800}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":604801}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":-1}`,
			`{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":60.5}`,
			`{"prompt":"x","approvers":["bob"],"tool_results_ttl_seconds":0}`,
			`{"prompt":"x","approvers":["bob"],"tool_results_ttl_seconds":9}`,
			`{"prompt":"x","approvers":["bob"],"tool_results_ttl_seconds":10}`,
			`{"prompt":"x","approvers":["bob"],"tool_results_ttl_seconds":604801}`,
			`{"prompt":"x","approvers":["bob"],"max_iterations":201}`,
			`{"prompt":"x","approvers":["bob"],"metadata":{"k":1}}`,
			`{"messages":[{"role":"robot","content":[]}],"approvers":["bob"]}`,
		},
		"Decision": {
			`{"turn_digest":"` + digest + `","action":"approve"}`,
			`{"turn_digest":"` + digest + `","action":"deny","message":"no"}`,
			`{"turn_digest":"` + digest + `","calls":[{"call_id":"a","action":"edit","input":{"x":1}},{"call_id":"b","action":"deny","message":"m"}]}`,
			`{"turn_digest":"` + digest + `"}`,
			`{"turn_digest":"` + digest + `","action":"approve","calls":[{"call_id":"a","action":"approve"}]}`,
			`{"turn_digest":"` + digest + `","action":"edit"}`,
			`{"turn_digest":"short","action":"approve"}`,
			`{"action":"approve"}`,
			`{"turn_digest":"` + digest + `","calls":[]}`,
			`{"turn_digest":"` + digest + `","calls":[{"call_id":"a","action":"approve","remember":"run"}]}`,
		},
	}
	for name, bodies := range samples {
		t.Run(name, func(t *testing.T) {
			raw, err := apispec.Draft4(name)
			if err != nil {
				t.Fatal(err)
			}
			var schemaDoc any
			if err := json.Unmarshal(raw, &schemaDoc); err != nil {
				t.Fatal(err)
			}
			if s, _ := schemaDoc.(map[string]any)["$schema"].(string); s != apispec.Draft4SchemaURI {
				t.Errorf("$schema %q", s)
			}
			c := jsonschema.NewCompiler()
			c.DefaultDraft(jsonschema.Draft4)
			if err := c.AddResource("model.json", schemaDoc); err != nil {
				t.Fatal(err)
			}
			model, err := c.Compile("model.json")
			if err != nil {
				t.Fatalf("the draft-4 export does not compile: %v\n%s", err, raw)
			}
			spec := doc.Components.Schemas[name].Value
			valid, invalid := 0, 0
			for _, body := range bodies {
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(body)))
				if err != nil {
					t.Fatal(err)
				}
				var kv any
				_ = json.Unmarshal([]byte(body), &kv)
				specErr := spec.VisitJSON(kv, openapi3.EnableJSONSchema2020())
				modelErr := model.Validate(v)
				if (specErr == nil) != (modelErr == nil) {
					t.Errorf("%s: spec says %v, draft-4 model says %v", body, specErr, modelErr)
				}
				if specErr == nil {
					valid++
				} else {
					invalid++
				}
			}
			if valid < 2 || invalid < 5 {
				t.Errorf("samples: %d valid, %d invalid; want both kinds", valid, invalid)
			}
		})
	}
	if _, err := apispec.Draft4("NoSuchSchema"); err == nil {
		t.Error("Draft4 of an unknown schema: want an error")
	}
}
