package soak

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// maxShown bounds the findings printed per kind (report.json has them all).
const maxShown = 10

// Print writes the soak's summary.
func Print(w io.Writer, res *Result) {
	r := &res.Report
	fmt.Fprintf(w, "\n== soak summary ==\n")
	fmt.Fprintf(w, "store %s, %d clients, seed %d; drove %.0fs, settled %.0fs; load average %.1f at start, %.1f at most, %.1f at end\n",
		res.Store, res.Clients, res.Seed, res.Duration.Seconds(), res.Settled.Seconds(), res.LoadStart, res.LoadMax, res.LoadEnd)
	fmt.Fprintf(w, "runs: %d accepted (202), %d POST /runs without an answer", r.Runs, r.StartUnknown)
	if r.Census != nil {
		orphans := 0
		for _, n := range r.Census.Orphans {
			orphans += n
		}
		fmt.Fprintf(w, "; the store holds %d runs (%d never answered: %s)", r.Census.Runs, orphans, counts(r.Census.Orphans))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "kills: %d (%s); %d triggers timed out (killed by timer); slowest restart %.1fs\n",
		r.Kills, counts(r.KillsByMode), r.Fallbacks, r.RestartMax.Seconds())
	fmt.Fprintf(w, "final status/reason: %s\n", counts(r.ByStatus))
	modes := make([]string, 0, len(r.ByMode))
	for m := range r.ByMode {
		modes = append(modes, string(m))
	}
	sort.Strings(modes)
	for _, m := range modes {
		fmt.Fprintf(w, "  %-15s %s\n", m, counts(r.ByMode[Mode(m)]))
	}
	fmt.Fprintf(w, "waiting for a human at the end: %d (%d of them undecided by the soak though it meant to decide)\n", r.Waiting, r.Undriven)
	fmt.Fprintf(w, "writes: %d recorder executions, %d approved recorder calls in accepted decisions, %d edited documents checked\n",
		r.Writes.Executions, r.Writes.Approved, r.Writes.Documents)
	fmt.Fprintf(w, "interrupted_write: %d, justified by a kill in the run's last segment %d (%s), unjustified %d\n",
		r.Interr.Total, r.Interr.Justified, counts(r.Interr.Classes), len(r.Findings[FindUnjustified]))
	fmt.Fprintf(w, "http: %d requests, %d without an answer (server down), 5xx %d; other non-2xx: %s\n",
		r.HTTP.Requests, r.HTTP.Conn, len(r.HTTP.ServerErrors), counts(r.HTTP.ByOutcome))
	fmt.Fprintf(w, "stuck %d, lost %d, double writes %d, unapproved executions %d\n",
		len(r.Findings[FindStuck]), len(r.Findings[FindLost]), len(r.Findings[FindDouble]), len(r.Findings[FindUnapproved]))
	kinds := make([]string, 0, len(r.Findings))
	for k := range r.Findings {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fs := r.Findings[k]
		fmt.Fprintf(w, "\n-- %s: %d\n", k, len(fs))
		for i, f := range fs {
			if i == maxShown {
				fmt.Fprintf(w, "  … %d more in report.json\n", len(fs)-maxShown)
				break
			}
			fmt.Fprintf(w, "  %s", f.RunID)
			if f.Mode != "" {
				fmt.Fprintf(w, " (%s)", f.Mode)
			}
			if f.Status != "" {
				fmt.Fprintf(w, " %s", f.Status)
			}
			fmt.Fprintf(w, ": %s\n", f.Detail)
			for _, e := range f.Events {
				fmt.Fprintf(w, "      %s\n", e)
			}
		}
	}
	if failed := r.Failed(); len(failed) > 0 {
		fmt.Fprintf(w, "\nSOAK FAILED: %s\n", strings.Join(failed, ", "))
		return
	}
	fmt.Fprintf(w, "\nSOAK PASSED\n")
}

// counts renders a count map as "k n, k n" in key order.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// ResultsHeader is the head of the results table (tools/soak/results.md)
// that ResultRow appends to: one line per soak, so each commit's figures
// stay next to the code they were measured on.
const ResultsHeader = `| date (UTC) | commit | store | seed | clients | drove / settled | runs | kills | stuck | lost | written twice | unapproved | interrupted_write (justified) | 5xx | load avg max | verdict |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
`

// ResultRow is one line of the results table for res, measured on commit
// at the given time.
func ResultRow(res *Result, commit string, at time.Time) string {
	r := &res.Report
	verdict := "passed"
	if failed := r.Failed(); len(failed) > 0 {
		verdict = "FAILED: " + strings.Join(failed, ", ")
	}
	return fmt.Sprintf("| %s | %s | %s | %d | %d | %.0f s / %.0f s | %d | %d | %d | %d | %d | %d | %d (%d) | %d | %.1f | %s |\n",
		at.UTC().Format("2006-01-02 15:04"), commit, res.Store, res.Seed, res.Clients, res.Duration.Seconds(), res.Settled.Seconds(),
		r.Runs, r.Kills, len(r.Findings[FindStuck]), len(r.Findings[FindLost]), len(r.Findings[FindDouble]), len(r.Findings[FindUnapproved]),
		r.Interr.Total, r.Interr.Justified, len(r.HTTP.ServerErrors), res.LoadMax, verdict)
}

// AppendResult appends ResultRow to the results table in path, writing
// the header first when the file is new.
func AppendResult(path string, res *Result, commit string, at time.Time) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644) //nolint:gosec // a path the operator gives
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && st.Size() == 0 {
		_, err = io.WriteString(f, ResultsHeader)
	}
	if err == nil {
		_, err = io.WriteString(f, ResultRow(res, commit, at))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
