package providertest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites golden files instead of comparing against them.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// GoldenJSON compares got, a JSON document, with testdata/golden/<name>.json
// after indenting both; with -update it rewrites the file instead.
func GoldenJSON(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	pretty := Indent(t, got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // testdata, checked into git
			t.Fatalf("create golden dir: %v", err)
		}
		if err := os.WriteFile(path, pretty, 0o644); err != nil { //nolint:gosec // testdata, checked into git
			t.Fatalf("write golden file: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(pretty, want) {
		t.Errorf("request body differs from %s (run with -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, pretty, want)
	}
}

// Indent returns the JSON document indented by two spaces, with a trailing
// newline; it fails the test if raw is not JSON.
func Indent(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}
