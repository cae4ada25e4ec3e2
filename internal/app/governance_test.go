package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/app"
)

// TestLoadGovernanceRefusesBrokenFiles: a broken directory or policy stops
// start-up with an error naming the file and the rule or entry at fault.
func TestLoadGovernanceRefusesBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	okDir := write("directory.json", `{"version":1,"persons":[{"id":"ann","aliases":["ann@example.com"]}],"groups":[{"name":"ops","members":["ann"]}]}`)
	tests := []struct {
		name, directory, policy string
		want                    []string
	}{
		{"CEL syntax error", okDir, write("p1.json", `{"version":1,"rules":[{"id":"ok","tools":["*"],"outcome":"allow","when":"true"},{"id":"broken-cel","tools":["write_*"],"when":"args.path.startsWith(","outcome":"deny"}]}`),
			[]string{"p1.json", `rules[1] "broken-cel": when:`}},
		{"CEL type error", okDir, write("p2.json", `{"version":1,"rules":[{"id":"not-bool","tools":["*"],"when":"args.size() + 1","outcome":"allow"}]}`),
			[]string{`rules[0] "not-bool"`, "want bool"}},
		{"unknown variable", okDir, write("p3.json", `{"version":1,"rules":[{"id":"who","tools":["*"],"when":"caller == 'x'","outcome":"allow"}]}`),
			[]string{`rules[0] "who"`, "undeclared reference"}},
		{"group the directory lacks", okDir, write("p4.json", `{"version":1,"rules":[{"id":"fin","tools":["*"],"outcome":"require_approval","approvers":["group:finance"]}]}`),
			[]string{`rules[0] "fin"`, "no such group"}},
		{"groups without a directory", "", write("p5.json", `{"version":1,"rules":[{"id":"ops","tools":["*"],"outcome":"require_approval","approvers":["group:ops"]}]}`),
			[]string{`rules[0] "ops"`, "no such group"}},
		{"unknown field", okDir, write("p6.json", `{"version":1,"rules":[{"id":"x","tools":["*"],"outcome":"allow","colour":"red"}]}`),
			[]string{"p6.json", "colour"}},
		{"broken directory", write("d2.json", `{"version":1,"persons":[{"id":"Ann","aliases":["ann@example.com"]}]}`), "",
			[]string{"d2.json", `persons[0] "Ann": id`}},
		{"missing file", filepath.Join(dir, "nope.json"), "", []string{"nope.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := app.LoadGovernance(tt.directory, tt.policy)
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	g, err := app.LoadGovernance(okDir, write("ok.json", `{"version":1,"rules":[{"id":"ops","tools":["*"],"outcome":"require_approval","approvers":["group:ops"]}]}`))
	if err != nil || g.Directory == nil || g.Policy == nil {
		t.Fatalf("valid files: %+v, %v", g, err)
	}
	if g, err := app.LoadGovernance("", ""); err != nil || g.Directory != nil || g.Policy != nil {
		t.Fatalf("no files: %+v, %v", g, err)
	}
}

// TestExampleFilesLoad keeps the README's example files valid.
func TestExampleFilesLoad(t *testing.T) {
	g, err := app.LoadGovernance(filepath.Join("..", "..", "examples", "directory.json"), filepath.Join("..", "..", "examples", "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Directory == nil || g.Policy == nil {
		t.Fatal("the examples loaded as nothing")
	}
}
