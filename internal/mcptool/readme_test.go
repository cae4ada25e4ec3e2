package mcptool_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/mcptool"
)

// TestReadmeMatchesTheConstants keeps the README's MCP section in step with
// the limits and names defined here, and checks its example file parses.
func TestReadmeMatchesTheConstants(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	i := strings.Index(readme, "## Bring your own tools")
	require.GreaterOrEqual(t, i, 0, "the README has the MCP section")
	section := readme[i:]
	section = section[:strings.Index(section, "\n## Tests")]
	flat := strings.Join(strings.Fields(section), " ")
	for _, want := range []string{
		"`" + mcptool.IdempotencyKeyMeta + "`",
		fmt.Sprintf("**%d KiB**", mcptool.MaxResultBytes>>10),
		fmt.Sprintf("at most %d pages and %d tools per server", mcptool.MaxListPages, mcptool.MaxToolsPerServer),
		fmt.Sprintf("1 to %d; 0 or unset: the default, %d", mcptool.MaxTimeoutSeconds, int(mcptool.DefaultTimeout.Seconds())),
		fmt.Sprintf("at most %d characters", mcptool.MaxServerNameLen),
		fmt.Sprintf("`^[a-zA-Z0-9_-]{1,%d}$`", mcptool.MaxToolNameLen),
		"`" + mcptool.EnvFile + "=" + mcptool.LayerPath + "`",
		fmt.Sprintf("at most **once every %d s** (`mcptool.DefaultRetryInterval`", int(mcptool.DefaultRetryInterval.Seconds())),
		fmt.Sprintf("at most every %s`", mcptool.DefaultRetryInterval),
		fmt.Sprintf("%d s locally, as at start-up", int(mcptool.DefaultConnectTimeout.Seconds())),
		fmt.Sprintf("| `list_every_seconds` | list the server again this often with no run asking (while it is absent: try to connect to it), so a tool it adds reaches runs without `allowed_tools`: 1 to %d; 0 or unset: off, the default", mcptool.MaxListEverySeconds),
		fmt.Sprintf("that it does not offer: 1 to %d; 0 or unset: the default, %d |", mcptool.MaxRetryIntervalSeconds, int(mcptool.DefaultRetryInterval.Seconds())),
		fmt.Sprintf("and of a run's wait for one: 1 to %d (", mcptool.MaxConnectTimeoutSeconds),
		fmt.Sprintf("0 or unset: the default, the start-up bound (4 s on Lambda, %d s locally)", int(mcptool.DefaultConnectTimeout.Seconds())),
	} {
		assert.Contains(t, flat, want)
	}
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(section)
	require.NotNil(t, m, "the section shows a tool-sources file")
	_, err = mcptool.ParseFile([]byte(m[1]), mcptool.ParseOptions{AllowEnvHeaders: true})
	assert.NoError(t, err, "the README's example file is valid")
}
