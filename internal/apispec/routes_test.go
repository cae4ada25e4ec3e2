package apispec_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/apispec"
)

// repoRoot is the module root, two levels up from this package.
var repoRoot = filepath.Join("..", "..")

// deployedRoutes are the spec's current operations the deployed REST API
// must serve: not planned, not local-only. "METHOD /path" -> authenticated.
func deployedRoutes(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, op := range apispec.Operations(doc) {
		if !op.LocalOnly {
			out[op.String()] = op.Authenticated
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCurrentSpecHasNoPlannedParts checks the stripping: planned
// operations, properties and enum values are gone from Current and present
// in Full.
func TestCurrentSpecHasNoPlannedParts(t *testing.T) {
	full, err := apispec.Full()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range apispec.Operations(cur) {
		if op.Planned {
			t.Errorf("Current still has planned operation %s", op)
		}
	}
	var planned []string
	for _, op := range apispec.Operations(full) {
		if op.Planned {
			planned = append(planned, op.String())
		}
	}
	for _, want := range []string{"POST /runs/{id}/tool-results"} {
		if !slices.Contains(planned, want) {
			t.Errorf("Full lacks planned operation %s (have %v)", want, planned)
		}
	}
	for _, tt := range []struct{ schema, prop string }{
		{"StartRequest", "client_tools"}, {"StartRequest", "tool_results_ttl_seconds"}, {"Run", "votes"}, {"Run", "tool_results"},
	} {
		if full.Components.Schemas[tt.schema].Value.Properties[tt.prop] == nil {
			t.Errorf("Full: %s lacks %s", tt.schema, tt.prop)
		}
		if cur.Components.Schemas[tt.schema].Value.Properties[tt.prop] != nil {
			t.Errorf("Current: %s still has planned %s", tt.schema, tt.prop)
		}
	}
	if slices.Contains(cur.Components.Schemas["Status"].Value.Enum, any("WAITING_FOR_TOOL_RESULTS")) {
		t.Error("Current: Status still has planned WAITING_FOR_TOOL_RESULTS")
	}
	if !slices.Contains(full.Components.Schemas["Status"].Value.Enum, any("WAITING_FOR_TOOL_RESULTS")) {
		t.Error("Full: Status lacks WAITING_FOR_TOOL_RESULTS")
	}
}

// readmeRoute matches a route row of the README's API table.
var readmeRoute = regexp.MustCompile("^\\| `(GET|POST|PUT|PATCH|DELETE|HEAD) (/[^` ?]*)[^`]*` \\|")

// TestREADMERoutesMatchSpec checks the README's route table against the
// spec: the same routes, no more, no fewer.
func TestREADMERoutesMatchSpec(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := readmeRoute.FindStringSubmatch(line); m != nil {
			readme[m[1]+" "+m[2]] = true
		}
	}
	want := deployedRoutes(t)
	if got, w := keys(readme), keys(want); !slices.Equal(got, w) {
		t.Errorf("README route table:\n got  %v\n want %v (openapi.yaml, without planned and local-only operations)", got, w)
	}
}

// cdkRoute is one entry of infra/stack's Routes table.
type cdkRoute struct {
	method, path, function string
	iam                    bool
}

// cdkRoutes reads `var Routes = []Route{...}` from infra/stack/api.go. The
// infra module is separate (and large), so the table is parsed, not
// imported.
func cdkRoutes(t *testing.T) []cdkRoute {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(repoRoot, "infra", "stack", "api.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []cdkRoute
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "Routes" || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatal("infra/stack: Routes is not a composite literal")
		}
		for _, el := range lit.Elts {
			r, ok := el.(*ast.CompositeLit)
			if !ok || len(r.Elts) != 4 {
				t.Fatalf("infra/stack: a Routes entry is not {method, path, function, iam}: %s", fset.Position(el.Pos()))
			}
			var vals []string
			for _, e := range r.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Value
				}
				switch e := e.(type) {
				case *ast.BasicLit:
					s, err := strconv.Unquote(e.Value)
					if err != nil {
						t.Fatal(err)
					}
					vals = append(vals, s)
				case *ast.Ident:
					vals = append(vals, e.Name)
				default:
					t.Fatalf("infra/stack: a Routes field is not a literal: %s", fset.Position(e.Pos()))
				}
			}
			out = append(out, cdkRoute{vals[0], vals[1], vals[2], vals[3] == "true"})
		}
		return false
	})
	if len(out) == 0 {
		t.Fatal("infra/stack/api.go: no Routes table found")
	}
	return out
}

// TestCDKRoutesMatchSpec checks the CDK REST API's methods against the
// spec: the same routes, AWS_IAM exactly where the spec requires
// authentication, and POST /runs on the startrun function, the rest on
// resume.
func TestCDKRoutesMatchSpec(t *testing.T) {
	want := deployedRoutes(t)
	got := map[string]bool{}
	for _, r := range cdkRoutes(t) {
		op := r.method + " " + r.path
		got[op] = r.iam
		if auth, ok := want[op]; ok && auth != r.iam {
			t.Errorf("CDK %s: IAM authorization %v, the spec says authenticated=%v", op, r.iam, auth)
		}
		fn := "resume"
		if op == "POST /runs" {
			fn = "startrun"
		}
		if r.function != fn {
			t.Errorf("CDK %s: served by %s, want %s", op, r.function, fn)
		}
	}
	if g, w := keys(got), keys(want); !slices.Equal(g, w) {
		t.Errorf("CDK REST API routes:\n got  %v\n want %v (openapi.yaml, without planned and local-only operations)", g, w)
	}
}
