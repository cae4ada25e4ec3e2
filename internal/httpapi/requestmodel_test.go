package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apispec"
)

// The body models API Gateway validates with (infra/: apispec.Draft4Shape of
// the spec's request components) must never refuse a body the handler would
// take, and what they refuse the handler must refuse as malformed (400), so
// that callers see one status whichever layer answers. Checked on valid
// bodies and on every variant that puts a value of another JSON type at one
// place of them or adds an unknown field.
// A null where the spec names a type is such a variant: the spec, the
// gateway and the handler call it a field of the wrong type (400).
func TestRequestModelsAgreeWithHandlers(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	valid := map[string][]string{
		"StartRequest": {
			`{"prompt":"update pricing","approvers":["` + bob + `","ops@example.com"]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"system":"s","model":"m",` +
				`"allowed_tools":["read_document"],"approvers":["` + bob + `"],"approval_ttl_seconds":600,` +
				`"max_iterations":3,"max_tokens":1000,"max_output_tokens":100,"denial_ends_run":true,"four_eyes":true,` +
				`"metadata":{"ticket":"T-1"}}`,
		},
		"Decision": {
			`{"turn_digest":"` + digest + `","action":"approve","message":"ok"}`,
			`{"turn_digest":"` + digest + `","calls":[{"call_id":"tu_write","action":"edit","message":"m","input":{"path":"p","text":"t"}},` +
				`{"call_id":"tu_read","action":"approve"}]}`,
		},
	}
	routes := map[string][2]string{"StartRequest": {"POST", "/runs"}, "Decision": {"POST", "/runs/r-unknown/decision"}}
	f := newFixture(t)
	for name, route := range routes {
		t.Run(name, func(t *testing.T) {
			schema := compileModel(t, name)
			rejected, nulls := 0, 0
			for _, body := range valid[name] {
				require.NoError(t, schema.Validate(decode(t, body)), "the model refuses a valid body: %s", body)
				for _, v := range variants(t, body) {
					if schema.Validate(decode(t, v.body)) == nil {
						continue
					}
					rejected++
					if v.null {
						nulls++
					}
					if status, out := f.call(req(route[0], route[1], alice, v.body)); status != 400 {
						t.Errorf("the model refuses %s, the handler answers %d %v (want 400)", v.body, status, out)
					}
				}
			}
			if rejected == 0 {
				t.Error("no variant was refused by the model; the test checks nothing")
			}
			t.Logf("%d variants refused by the model (%d with a null), all 400 in the handler", rejected, nulls)
		})
	}
}

func compileModel(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	raw, err := apispec.Draft4Shape(name)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	url := "mem://models/" + name + ".json"
	require.NoError(t, c.AddResource(url, decode(t, string(raw))))
	s, err := c.Compile(url)
	require.NoError(t, err)
	return s
}

func decode(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	require.NoError(t, err)
	return v
}

// variant is a body derived from a valid one; null says the change put a
// null somewhere.
type variant struct {
	body string
	null bool
}

// variants returns body with, at each place in turn, the value replaced by
// one of another JSON type, and with an unknown field added to each object.
func variants(t *testing.T, body string) []variant {
	t.Helper()
	var root any
	require.NoError(t, json.Unmarshal([]byte(body), &root))
	replacements := []any{"text", 7.0, 1.5, true, nil, []any{}, []any{"x"}, map[string]any{}, map[string]any{"k": "v"}}
	var out []variant
	var walk func(get func() any, set func(any))
	walk = func(get func() any, set func(any)) {
		orig := get()
		for _, r := range replacements {
			set(r)
			out = append(out, variant{body: mustJSON(t, root), null: r == nil})
		}
		set(orig)
		switch v := orig.(type) {
		case map[string]any:
			v["unknown_field"] = 1
			out = append(out, variant{body: mustJSON(t, root)})
			delete(v, "unknown_field")
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(func() any { return v[k] }, func(x any) { v[k] = x })
			}
		case []any:
			for i := range v {
				walk(func() any { return v[i] }, func(x any) { v[i] = x })
			}
		}
	}
	walk(func() any { return root }, func(x any) { root = x })
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v), fmt.Sprint(v))
	return strings.TrimSpace(buf.String())
}
