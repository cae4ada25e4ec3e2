package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAppendResultWritesOneRowPerSoak(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.md")
	at := time.Date(2026, 12, 3, 15, 4, 0, 0, time.UTC)
	res := &Result{Store: "aws", Clients: 8, Seed: 42, Duration: 120 * time.Second, Settled: 35 * time.Second, LoadMax: 3.25,
		Report: Report{Runs: 900, Kills: 24, Interr: InterruptedSummary{Total: 5, Justified: 5}}}
	if err := AppendResult(path, res, "abc123", at); err != nil {
		t.Fatal(err)
	}
	res.Report.add(FindStuck, Finding{RunID: "r1"})
	res.Report.add(FindDouble, Finding{RunID: "r2"})
	if err := AppendResult(path, res, "abc123-dirty", at); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header of 2 and 2 rows:\n%s", len(lines), b)
	}
	cols := strings.Count(lines[0], "|")
	for _, l := range lines[1:] {
		if strings.Count(l, "|") != cols {
			t.Errorf("row %q has %d separators, the header %d", l, strings.Count(l, "|"), cols)
		}
	}
	want := "| 2026-12-03 15:04 | abc123 | aws | 42 | 8 | 120 s / 35 s | 900 | 24 | 0 | 0 | 0 | 0 | 5 (5) | 0 | 3.2 | passed |"
	if lines[2] != want {
		t.Errorf("row\n%s\nwant\n%s", lines[2], want)
	}
	if !strings.Contains(lines[3], "| 1 | 0 | 1 |") || !strings.HasSuffix(lines[3], "| FAILED: double_write: 1, stuck: 1 |") {
		t.Errorf("failed row %q: want stuck 1, lost 0, twice 1 and the failed invariants", lines[3])
	}
}
