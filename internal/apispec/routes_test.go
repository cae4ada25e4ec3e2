package apispec_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/routes"
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
	if slices.Contains(cur.Components.Schemas["ErrorCode"].Value.Enum, any("malformed")) {
		t.Error("Current: ErrorCode still has planned malformed")
	}
	if !slices.Contains(full.Components.Schemas["ErrorCode"].Value.Enum, any("malformed")) {
		t.Error("Full: ErrorCode lacks malformed")
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

// bodyLimit reads "At most N KiB." from a request body's description.
var bodyLimit = regexp.MustCompile(`At most (\d+) KiB`)

// TestRouteTableMatchesSpec checks the route table (internal/routes), which
// drives the handler, the local gateway and the CDK REST API, against the
// spec: the same operations (planned ones left out), the same operationIds,
// authentication exactly where the spec requires it, local-only where the
// spec says so, and each body limit the one the spec states.
func TestRouteTableMatchesSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]routes.Route{}
	for _, r := range routes.All() {
		table[r.String()] = r
	}
	spec := map[string]bool{}
	for _, op := range apispec.Operations(doc) {
		spec[op.String()] = true
		r, ok := table[op.String()]
		if !ok {
			continue
		}
		if r.Operation != op.ID {
			t.Errorf("%s: operation %q, the spec's operationId is %q", op, r.Operation, op.ID)
		}
		if r.Authenticated != op.Authenticated {
			t.Errorf("%s: authenticated %v, the spec says %v", op, r.Authenticated, op.Authenticated)
		}
		if r.LocalOnly != op.LocalOnly {
			t.Errorf("%s: local-only %v, the spec says %v", op, r.LocalOnly, op.LocalOnly)
		}
		if (r.Function == routes.StartRun) != (op.String() == "POST /runs") {
			t.Errorf("%s: served by %s; only POST /runs is the startrun function's", op, r.Function)
		}
		want := 0
		if body := doc.Paths.Value(op.Path).GetOperation(op.Method).RequestBody; body != nil && body.Value != nil {
			m := bodyLimit.FindStringSubmatch(body.Value.Description)
			if m == nil {
				t.Errorf("%s: the spec's request body does not say its limit (\"At most N KiB.\")", op)
				continue
			}
			kib, _ := strconv.Atoi(m[1])
			want = kib << 10
		}
		if r.MaxBody != want {
			t.Errorf("%s: body limit %d bytes, the spec says %d", op, r.MaxBody, want)
		}
	}
	if g, w := keys(mapKeys(table)), keys(spec); !slices.Equal(g, w) {
		t.Errorf("route table:\n got  %v\n want %v (openapi.yaml without planned operations)", g, w)
	}
}

func mapKeys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
