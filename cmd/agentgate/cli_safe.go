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
// under their eyes. Only the CLI's own colour sequences pass.
type terminalSafe struct{ w io.Writer }

// ownSequences are the escape sequences the CLI itself writes.
var ownSequences = []string{ansiRed, ansiGreen, ansiCyan, ansiBold, ansiReset}

// Write writes p made safe; it reports len(p) when all of it was written.
func (t terminalSafe) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, terminalText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// terminalText is s with every control and format character but newline,
// tab and the CLI's own colour sequences made visible.
func terminalText(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '\x1b')
		if i < 0 {
			b.WriteString(approval.CleanText(s))
			break
		}
		b.WriteString(approval.CleanText(s[:i]))
		s = s[i:]
		own := ""
		for _, seq := range ownSequences {
			if strings.HasPrefix(s, seq) {
				own = seq
				break
			}
		}
		if own == "" {
			own = approval.CleanText(s[:1]) // ESC, made visible
			s = s[1:]
		} else {
			s = s[len(own):]
		}
		b.WriteString(own)
	}
	return b.String()
}

// unwrapTerminal returns the writer a terminalSafe writes to (for the
// terminal and colour checks), or w itself.
func unwrapTerminal(w any) any {
	if t, ok := w.(terminalSafe); ok {
		return t.w
	}
	return w
}
