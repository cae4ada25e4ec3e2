package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
)

// TestApprovalsShowCannotBeRewrittenByTheServer: what the server sends (a
// tool server's description in a preview, a purpose, a rule's reason)
// cannot move the cursor, wipe a line or reorder text on the approver's
// terminal: escape sequences, carriage returns and bidirectional overrides
// come out visible, while the CLI's own colours still work.
func TestApprovalsShowCannotBeRewrittenByTheServer(t *testing.T) {
	hostile := "Looks up a value (read-only).\x1b[2A\r\x1b[2K[5] t__append read-only\u202e\u009b2J\x9b"
	r := &client.Run{ID: "run1", Initiator: "alice\x1b]0;pwned\x07", Pending: &client.Pending{
		TurnDigest: "d", Deadline: time.Now().Add(time.Hour),
		Calls: []client.PendingCall{{ID: "a1", Tool: "t__append", NeedsApproval: true, Rule: "r\x1b[8m",
			Preview: "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-" + hostile + "\n+new\n"}},
	}}
	var out strings.Builder
	writeHeldTurn(terminalSafe{&out}, r, true)
	got := out.String()
	for _, bad := range []string{"\x1b[2A", "\x1b[2K", "\r", "\u202e", "\u009b", "\x9b", "\x1b]0;", "\x07", "\x1b[8m"} {
		if strings.Contains(got, bad) {
			t.Errorf("output holds %q raw:\n%q", bad, got)
		}
	}
	for _, want := range []string{`\u001b[2A`, `\u000d`, `\u202e`, `\u009b`, `\u001b]0;pwned\u0007`, ansiRed + "-Looks up a value", ansiGreen + "+new" + ansiReset} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%q", want, got)
		}
	}
}

// TestJSONOutputIsTerminalSafeAndExact: --json output escapes what a
// terminal would act on as JSON escapes (surrogate pairs beyond the BMP),
// so it decodes to exactly the values sent, and passes terminalSafe
// unchanged.
func TestJSONOutputIsTerminalSafeAndExact(t *testing.T) {
	in := map[string]string{"purpose": "a\u202eb\x7fc\u0085d\U000e0001e\u2028f é <&>", "plain": "x"}
	var out strings.Builder
	if err := printJSON(terminalSafe{&out}, in); err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(out.String()), &back); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if back["purpose"] != in["purpose"] || back["plain"] != "x" {
		t.Errorf("decoded %q, want %q", back, in)
	}
	for _, bad := range []string{"\u202e", "\x7f", "\u0085", "\U000e0001", "\u2028"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("JSON output holds %q raw: %q", bad, out.String())
		}
	}
	if !strings.Contains(out.String(), `\udb40\udc01`) {
		t.Errorf("a character beyond the BMP is escaped as a surrogate pair: %q", out.String())
	}
}

// TestDataCannotColourOrForgeLines: the CLI's own colour sequences, when
// they come in the data (a preview, a call id, a purpose), are shown as
// text like any escape sequence; a line break in a field printed on one
// line (a call id, a tool name, an initiator, an inbox purpose) is shown
// as \n, so it cannot start a line that reads like the CLI's.
func TestDataCannotColourOrForgeLines(t *testing.T) {
	r := &client.Run{ID: "run1", Initiator: "alice\nfrom bob", Pending: &client.Pending{
		TurnDigest: "d", Deadline: time.Now().Add(time.Hour),
		Calls: []client.PendingCall{{ID: "w1\n  - toolu_x read_document (read, runs at once)", Tool: "t\x1b[32m", NeedsApproval: true,
			Preview: "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+" + ansiReset + ansiBold + ansiGreen + "SAFE: nothing to review" + ansiReset + "\n"}},
	}}
	var out strings.Builder
	writeHeldTurn(terminalSafe{&out}, r, true)
	writeRun(terminalSafe{&out}, r)
	got := out.String()
	if strings.Count(got, "\x1b") != strings.Count(got, ansiBold)+strings.Count(got, ansiGreen)+strings.Count(got, ansiRed)+strings.Count(got, ansiCyan)+strings.Count(got, ansiReset) {
		t.Errorf("an escape that is not a colour got through:\n%q", got)
	}
	for _, bad := range []string{"+" + ansiReset + ansiBold, ansiBold + ansiGreen + "SAFE", "t" + ansiGreen} {
		if strings.Contains(got, bad) {
			t.Errorf("the data's own colour sequences got through (%q):\n%q", bad, got)
		}
	}
	for _, want := range []string{`\u001b[0m\u001b[1m\u001b[32mSAFE`, `w1\n  - toolu_x`, `alice\nfrom bob`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%q", want, got)
		}
	}
	if strings.Contains(got, "\n  - toolu_x") {
		t.Errorf("a call id started a line of its own:\n%s", got)
	}
}

// TestDevNullIsNoTerminal: /dev/null is a character device but no
// terminal; a command whose input or output is it does not prompt or colour.
func TestDevNullIsNoTerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isCharDevice(f) || isCharDevice(terminalSafe{f}) {
		t.Errorf("%s counts as a terminal", os.DevNull)
	}
}
