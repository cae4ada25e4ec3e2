package main

import (
	"io"
	"strings"

	"github.com/agentgate/agentgate/internal/approval"
)

// terminalSafe is the writer the API commands print through. Most of what
// they print comes from the server and, behind it, from models, tool
// servers and callers: a tool's description, a preview, a purpose, an
// error message. Every control or format character in it (an escape
// sequence that moves the cursor or clears a line, a carriage return, a
// bidirectional override) is made visible as approval.CleanText does for
// the mail and the page, so nothing an approver reads can be rewritten
// under their eyes. The CLI's own colours do not go through it (paint
// writes them beside it), so no escape sequence of the data passes, not
// even one that looks like the CLI's own.
type terminalSafe struct{ w io.Writer }

// paint writes the CLI's own escape sequence seq to w: to the writer
// beneath when w is a terminalSafe (which would make it visible).
func paint(w io.Writer, seq string) {
	if t, ok := w.(terminalSafe); ok {
		w = t.w
	}
	_, _ = io.WriteString(w, seq)
}

// one is s for a field printed on one line (an id, a name, a purpose):
// line breaks and tabs in it are shown as \n, \r and \t, so a value
// cannot start a line of its own that reads like the CLI's.
func one(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
}

// Write writes p made safe; it reports len(p) when all of it was written.
func (t terminalSafe) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, terminalText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// terminalText is s with every control and format character but newline
// and tab made visible, escape sequences included.
func terminalText(s string) string {
	return approval.CleanText(s)
}

// unwrapTerminal returns the writer a terminalSafe writes to (for the
// terminal and colour checks), or w itself.
func unwrapTerminal(w any) any {
	if t, ok := w.(terminalSafe); ok {
		return t.w
	}
	return w
}
