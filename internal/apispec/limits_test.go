package apispec_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

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
	"runs.MaxRequestSize":              runs.MaxRequestSize,
	"service.MaxPromptBytes":           service.MaxPromptBytes,
	"runs.MaxApprovers":                runs.MaxApprovers,
	"runs.MaxMetadataEntries":          runs.MaxMetadataEntries,
	"runs.MaxMetadataBytes":            runs.MaxMetadataBytes,
	"runs.MaxDecisionSize":             runs.MaxDecisionSize,
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
