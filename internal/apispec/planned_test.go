package apispec_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/agentgate/agentgate"
	"github.com/agentgate/agentgate/internal/apispec"
)

// plannedNames walks a decoded YAML tree and returns the name of every
// planned part: the key of an operation or property marked planned, and
// each value of an x-agentgate-planned-values list.
func plannedNames(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if m, ok := child.(map[string]any); ok && m[apispec.ExtStatus] == apispec.StatusPlanned {
				*out = append(*out, k)
			}
			if k == apispec.ExtPlannedValues {
				for _, val := range child.([]any) {
					*out = append(*out, val.(string))
				}
			}
			plannedNames(child, out)
		}
	case []any:
		for _, child := range v {
			plannedNames(child, out)
		}
	}
}

// paragraphWith returns the blank-line-separated paragraph of text that
// holds marker, or "".
func paragraphWith(text, marker string) string {
	for _, p := range strings.Split(text, "\n\n") {
		if strings.Contains(p, marker) {
			return strings.Join(strings.Fields(p), " ")
		}
	}
	return ""
}

// TestDocsNameWhatIsPlanned: the README's and the spec's own "not yet
// implemented" text name each part still marked planned, and say how many
// there are ("Only one is left" while one is), so neither lists work that
// has landed.
func TestDocsNameWhatIsPlanned(t *testing.T) {
	var tree any
	if err := yaml.Unmarshal(agentgate.OpenAPI, &tree); err != nil {
		t.Fatal(err)
	}
	var names []string
	plannedNames(tree, &names)
	slices.Sort(names)
	names = slices.Compact(names)
	info := tree.(map[string]any)["info"].(map[string]any)["description"].(string)
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for doc, p := range map[string]string{
		"README.md":                     paragraphWith(string(readme), "x-agentgate-status: planned"),
		"openapi.yaml info.description": paragraphWith(info, "**Not yet implemented.**"),
	} {
		if p == "" {
			t.Errorf("%s has no paragraph on planned parts", doc)
			continue
		}
		for _, n := range names {
			if !strings.Contains(p, "`"+n+"`") {
				t.Errorf("%s does not name the planned %s: %q", doc, n, p)
			}
		}
		if len(names) == 1 && !strings.Contains(p, "Only one is left") {
			t.Errorf("%s: one part is planned (%v), and the text should say it is the only one: %q", doc, names, p)
		}
		if strings.Contains(p, "(#") {
			t.Errorf("%s names issues as still open: %q", doc, p)
		}
	}
}
