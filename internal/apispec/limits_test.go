package apispec_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// limitConstants are the limits the README's table names, by the name it
// gives them.
var limitConstants = map[string]int{
	"routes.MaxStartBody":              routes.MaxStartBody,
	"routes.MaxDecisionBody":           routes.MaxDecisionBody,
	"routes.MaxFormBody":               routes.MaxFormBody,
	"routes.MaxCancelBody":             routes.MaxCancelBody,
	"httpapi.MaxJSONDepth":             httpapi.MaxJSONDepth,
	"runs.MaxRequestSize":              runs.MaxRequestSize,
	"service.MaxPromptBytes":           service.MaxPromptBytes,
	"runs.MaxApprovers":                runs.MaxApprovers,
	"runs.MaxMetadataEntries":          runs.MaxMetadataEntries,
	"runs.MaxMetadataBytes":            runs.MaxMetadataBytes,
	"runs.MaxDecisionSize":             runs.MaxDecisionSize,
	"runs.MaxVoteMessagesSize":         runs.MaxVoteMessagesSize,
	"loop.MaxHeldCalls":                loop.MaxHeldCalls,
	"loop.MaxCallIDBytes":              loop.MaxCallIDBytes,
	"loop.MaxPreviewBytes":             loop.MaxPreviewBytes,
	"runs.MaxStateSize":                runs.MaxStateSize,
	"runs.MaxPendingCallsSize":         runs.MaxPendingCallsSize,
	"runs.SummaryInputBytes":           runs.SummaryInputBytes,
	"runs.SummaryPreviewBytes":         runs.SummaryPreviewBytes,
	"runs.MaxOutputSize":               runs.MaxOutputSize,
	"loop.MaxAuditInputBytes":          loop.MaxAuditInputBytes,
	"runs.MaxEventDataSize":            runs.MaxEventDataSize,
	"mcptool.MaxResultBytes":           mcptool.MaxResultBytes,
	"service.MaxClientTools":           service.MaxClientTools,
	"service.MaxClientToolDescription": service.MaxClientToolDescription,
	"service.MaxClientToolSchema":      service.MaxClientToolSchema,
	"service.MaxToolExecutors":         service.MaxToolExecutors,
	"service.MaxRequireApproval":       service.MaxRequireApproval,
	"routes.MaxToolResultsBody":        routes.MaxToolResultsBody,
	"runs.MaxToolResultSize":           runs.MaxToolResultSize,
	"runs.MaxToolResultsSize":          runs.MaxToolResultsSize,
	"runs.MaxHandOverCallsSize":        runs.MaxHandOverCallsSize,
	"runs.MaxIdempotencyKeyBytes":      runs.MaxIdempotencyKeyBytes,
}

// limitRow matches a row of the README's limits table: what, the number,
// the constant.
var limitRow = regexp.MustCompile("^\\| [^|]+ \\| (\\d+)[^|]* \\| `([a-z]+\\.[A-Za-z]+)` \\|")

// TestREADMELimitsMatchConstants checks that every row of the README's
// limits table gives its constant's value, and that every limit above has
// a row: the README says each limit once, from the code.
func TestREADMELimitsMatchConstants(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "### Limits\n")
	if !ok {
		t.Fatal("README has no ### Limits section")
	}
	table, _, _ = strings.Cut(table, "\n\n#")
	seen := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		m := limitRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		want, ok := limitConstants[m[2]]
		if !ok {
			t.Errorf("README limits: %s is not a known limit constant", m[2])
			continue
		}
		got, _ := strconv.Atoi(m[1])
		if got != want {
			t.Errorf("README limits: %s is %d in the README, %d in the code", m[2], got, want)
		}
		if seen[m[2]] {
			t.Errorf("README limits: %s has two rows", m[2])
		}
		seen[m[2]] = true
	}
	for name := range limitConstants {
		if !seen[name] {
			t.Errorf("README limits: no row for %s", name)
		}
	}
}

// TestSpecWindowsAreTheServersRanges: the start request's windows are
// 0 (the default) or a range, in the schema itself (not only in its
// description), and the range is the service's constants: the spec
// accepts exactly the values the server does, at each edge.
func TestSpecWindowsAreTheServersRanges(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	props := doc.Components.Schemas["StartRequest"].Value.Properties
	for _, tt := range []struct {
		field    string
		min, max time.Duration
	}{
		{"approval_ttl_seconds", service.MinApprovalTTL, service.MaxApprovalTTL},
		{"tool_results_ttl_seconds", service.MinToolResultsTTL, service.MaxToolResultsTTL},
	} {
		t.Run(tt.field, func(t *testing.T) {
			ref := props[tt.field]
			if ref == nil || ref.Value == nil {
				t.Fatalf("StartRequest has no property %s", tt.field)
			}
			s := ref.Value
			if !s.Type.Is(openapi3.TypeInteger) || len(s.AnyOf) != 2 {
				t.Fatalf("%s: type %v with %d anyOf branches; want an integer, 0 or a range", tt.field, s.Type, len(s.AnyOf))
			}
			zero, rng := s.AnyOf[0].Value, s.AnyOf[1].Value
			if c, ok := zero.Const.(float64); !ok || c != 0 {
				t.Errorf("%s: first branch const %#v, want 0", tt.field, zero.Const)
			}
			lo, hi := int64(tt.min/time.Second), int64(tt.max/time.Second)
			if rng.Min == nil || rng.Max == nil || int64(*rng.Min) != lo || int64(*rng.Max) != hi {
				t.Errorf("%s: range %v to %v, want %d to %d (the service's constants)", tt.field, rng.Min, rng.Max, lo, hi)
			}
			for _, v := range []struct {
				n  int64
				ok bool
			}{{0, true}, {-1, false}, {1, false}, {lo - 1, false}, {lo, true}, {hi, true}, {hi + 1, false}} {
				body := `{"prompt":"x","approvers":["bob"],"` + tt.field + `":` + strconv.FormatInt(v.n, 10) + `}`
				var kv any
				if err := json.Unmarshal([]byte(body), &kv); err != nil {
					t.Fatal(err)
				}
				err := doc.Components.Schemas["StartRequest"].Value.VisitJSON(kv, openapi3.EnableJSONSchema2020())
				if (err == nil) != v.ok {
					t.Errorf("%s = %d: the spec says %v, want accepted %v", tt.field, v.n, err, v.ok)
				}
			}
		})
	}
}

// TestSpecIdempotencyKeyIsTheServersRule: the spec's Idempotency-Key
// accepts exactly the keys the server does (runs.ValidIdempotencyKey), its
// longest being the server's constant.
func TestSpecIdempotencyKeyIsTheServersRule(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	p := doc.Components.Parameters["IdempotencyKey"]
	if p == nil || p.Value == nil || p.Value.In != "header" || p.Value.Name != httpapi.IdempotencyKeyHeader || p.Value.Required {
		t.Fatalf("components/parameters/IdempotencyKey: want the optional header %s, got %+v", httpapi.IdempotencyKeyHeader, p)
	}
	s := p.Value.Schema.Value
	if s.MaxLength == nil || *s.MaxLength != runs.MaxIdempotencyKeyBytes {
		t.Errorf("maxLength %v, want runs.MaxIdempotencyKeyBytes = %d", s.MaxLength, runs.MaxIdempotencyKeyBytes)
	}
	keys := []string{"", "a", "!", "~", "k 1", "k\t", "k\x7f", "caf\u00e9", `"quoted"`, "8e03978e-40d5-43e8-bc93-6894a57f9324",
		strings.Repeat("k", runs.MaxIdempotencyKeyBytes), strings.Repeat("k", runs.MaxIdempotencyKeyBytes+1)}
	for c := byte(0); c < 128; c++ {
		keys = append(keys, "k"+string(rune(c)))
	}
	for _, k := range keys {
		specOK := s.VisitJSON(k) == nil
		if want := runs.ValidIdempotencyKey(k); specOK != want {
			t.Errorf("key %q: the spec accepts it %v, the server %v", k, specOK, want)
		}
	}
}
