package agentgate_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEveryPackage: the README's Layout section names
// every Go package of the tree (infra's module included), either by its
// path or, for a package below one the section lists, by its name in that
// entry; and every path it names exists. A package added or moved without
// updating the section fails here.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Layout\n\n```\n")
	if !ok {
		t.Fatal("README.md has no Layout section with a code block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("the Layout code block is not closed")
	}

	// entries: each listed path (a line's first word) with its text,
	// continuation lines (indented) included.
	entries := map[string]string{}
	var last string
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case line[0] == ' ' && last != "":
			entries[last] += " " + strings.TrimSpace(line)
		default:
			last = strings.TrimSuffix(strings.Fields(line)[0], "/")
			entries[last] = line
		}
	}
	named := regexp.MustCompile(`(?:^|[\s(])((?:internal|cmd|functions|tools|infra|client|scripts)/[\w./-]*\w)`)
	for _, m := range named.FindAllStringSubmatch(block, -1) {
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("the Layout section names %s, which does not exist", m[1])
		}
	}

	for _, dir := range packageDirs(t) {
		if dir == "." || strings.Contains(block, dir) {
			continue
		}
		covered := false
		for parent := path.Dir(dir); parent != "."; parent = path.Dir(parent) {
			if text, ok := entries[parent]; ok {
				covered = strings.Contains(strings.ToLower(text), strings.ToLower(path.Base(dir)))
				break
			}
		}
		if !covered {
			t.Errorf("the README's Layout section does not name package %s", dir)
		}
	}
}

// packageDirs lists the directories holding Go files, slash-separated and
// relative to the module root, sorted.
func packageDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "cdk.out", "bin", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			seen[filepath.ToSlash(filepath.Dir(p))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}
