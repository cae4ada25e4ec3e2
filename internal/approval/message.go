package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// Limits applied by Compose so that a mail stays readable and small; the
// approval page shows everything in full.
const (
	// PurposeLimit is how many characters of the purpose a mail shows.
	PurposeLimit = 300
	// ValueLimit is how many characters of one call's arguments or preview
	// a mail shows.
	ValueLimit = 8000
)

// Message is what one approval mail says, to one approver about one
// suspension.
type Message struct {
	// RunID and SuspensionID name the suspension the link decides.
	RunID        string
	SuspensionID string
	// Approver is the recipient's e-mail address.
	Approver string
	// Initiator is who started the run.
	Initiator string
	// Purpose says what the run is for, usually the start of its prompt;
	// Compose shows at most PurposeLimit characters of it.
	Purpose string
	// Calls are the pending calls of the held turn, in turn order.
	Calls []runs.CallSummary
	// Deadline is when the run expires without a decision.
	Deadline time.Time
	// Link is the approval link, {base}/approvals/{token} (see Link). It is a
	// secret: whoever holds it can decide.
	Link string
	// Reminder marks the second mail, sent when most of the window passed.
	Reminder bool
	// VotesNeeded is how many distinct persons must approve (0 or 1: one
	// for each call; under a quorum the most any held call needs). Voting
	// says votes decide the turn, call by call (runs.Run.Voting: a quorum,
	// or calls no one person may decide together); Voted names who
	// approved a held call so far and StillNeeded who may still vote;
	// Progress is each held call's own vote progress (Progress), which the
	// mail shows where the calls differ or votes were cast.
	VotesNeeded int
	Voting      bool
	Voted       []string
	StillNeeded []string
	Progress    []CallProgress
	// Others, where votes decide the turn, are the ids of the held calls
	// the reader may not decide (other approvers decide them), marked so
	// in the mail as on the page.
	Others []string
}

// Validate reports the first field of m a mail cannot do without.
func (m Message) Validate() error {
	switch {
	case m.RunID == "":
		return fmt.Errorf("approval message: run id is empty")
	case m.Approver == "":
		return fmt.Errorf("approval message for run %s: approver is empty", m.RunID)
	case m.Link == "":
		return fmt.Errorf("approval message for run %s: link is empty", m.RunID)
	case !validLink(m.Link):
		return fmt.Errorf("approval message for run %s: link is not an absolute http(s) URL of printable ASCII", m.RunID)
	case m.Deadline.IsZero():
		return fmt.Errorf("approval message for run %s: deadline is zero", m.RunID)
	}
	if err := CheckAddress(m.Approver); err != nil {
		return fmt.Errorf("approval message for run %s: approver: %w", m.RunID, err)
	}
	return nil
}

// validLink reports whether link is an absolute http or https URL with a
// host, written in printable ASCII without spaces: it goes into both bodies
// as it is, so it must carry nothing a reader or a mail client could
// mistake for text or markup (a control character, a line break).
func validLink(link string) bool {
	for i := 0; i < len(link); i++ {
		if link[i] <= ' ' || link[i] > '~' {
			return false
		}
	}
	u, err := url.Parse(link)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil
}

// mailView is what a mail shows: every string already cleaned of control
// characters and cut to its limit (mail.go renders it).
type mailView struct {
	Subject      string
	Reminder     bool
	RunID        string
	SuspensionID string
	Approver     string
	Initiator    string
	Purpose      string
	Deadline     string
	Link         string
	Calls        []callView
	NeedApproval int
	// Voting: votes decide the turn, call by call (Message.Voting).
	// SameNeeds: every held call needs VotesNeeded approvals; More what
	// the open calls still need (MoreApprovals), "" when that is
	// VotesNeeded of each.
	Voting      bool
	VotesNeeded int
	SameNeeds   bool
	Voted       string
	StillNeeded string
	More        string
}

type callView struct {
	Number        int
	ID            string
	Tool          string
	Effect        string
	NeedsApproval bool
	Arguments     string
	Preview       string
	Rule          string
	RuleNote      string
	Denied        string
	// Rejected is why a call that needs no approval cannot run at all
	// (runs.CallSummary.Rejected).
	Rejected string
	// Others: a held call the reader may not decide (Message.Others).
	Others bool
	// DefinitionNote: the tool's definition could not be checked when the
	// turn was held (DefinitionNote).
	DefinitionNote string
}

// Compose renders m as a mail: a one-line subject, a plain-text body and an
// HTML body. The HTML uses inline styles only, no scripts and no external
// images, and escapes every value; both bodies replace control and
// bidirectional-override characters with visible escapes, so text the model
// wrote cannot disguise itself.
func Compose(m Message) (subject, text, html string, err error) {
	if err := m.Validate(); err != nil {
		return "", "", "", err
	}
	v := mailView{
		Reminder:     m.Reminder,
		RunID:        CleanText(m.RunID),
		SuspensionID: CleanText(m.SuspensionID),
		Approver:     CleanText(m.Approver),
		Initiator:    CleanText(m.Initiator),
		Purpose:      truncate(CleanText(m.Purpose), PurposeLimit),
		Deadline:     FormatDeadline(m.Deadline),
		Link:         m.Link,
		VotesNeeded:  m.VotesNeeded,
		Voting:       m.Voting,
		Voted:        truncate(CleanText(strings.Join(m.Voted, ", ")), ValueLimit),
		StillNeeded:  truncate(CleanText(strings.Join(m.StillNeeded, ", ")), ValueLimit),
		SameNeeds:    SameNeeds(m.Progress),
	}
	if !Untouched(m.Progress, m.VotesNeeded) {
		v.More = truncate(oneLine(CleanText(MoreApprovals(m.Progress))), ValueLimit)
	}
	for i, c := range m.Calls {
		v.Calls = append(v.Calls, callView{
			Number:        i + 1,
			ID:            CleanText(c.ID),
			Tool:          CleanText(c.Tool),
			Effect:        CleanText(string(c.Effect)),
			NeedsApproval: c.NeedsApproval,
			Arguments:     shownArguments(c),
			Preview:       shownPreview(c),
			Rule:          CleanText(c.Rule),
			RuleNote:      truncate(CleanText(RuleNote(c)), ValueLimit),
			Denied:        truncate(CleanText(c.Denied), ValueLimit),
			// The note is short (its reason is capped): never cut.
			DefinitionNote: CleanText(DefinitionNote(c.DefinitionUnverified)),
			Others:         c.NeedsApproval && slices.Contains(m.Others, c.ID),
		})
		if !c.NeedsApproval && c.Denied == "" {
			v.Calls[len(v.Calls)-1].Rejected = truncate(CleanText(c.Rejected), ValueLimit)
		}
		if c.NeedsApproval {
			v.NeedApproval++
		}
	}
	v.Subject = subjectFor(m, v)
	return v.Subject, v.text(), v.html(), nil
}

// subjectFor names the tool (or the number of calls) needing approval; it
// is one line of at most about 100 characters, without "=?".
func subjectFor(m Message, v mailView) string {
	var what string
	var tools []string
	for _, c := range v.Calls {
		if c.NeedsApproval {
			tools = append(tools, c.Tool)
		}
	}
	switch len(tools) {
	case 0:
		what = "a tool call"
	case 1:
		what = truncate(oneLine(tools[0]), 60)
	default:
		what = fmt.Sprintf("%d tool calls", len(tools))
	}
	s := fmt.Sprintf("Approval needed: %s (run %s)", what, truncate(oneLine(v.RunID), 40))
	if m.Reminder {
		s = "Reminder: " + s
	}
	// "=?" starts an RFC 2047 encoded word: SES writes an ASCII subject as
	// it is, and a mail reader would show the word decoded, not the text.
	return strings.ReplaceAll(s, "=?", "= ?")
}

// FormatDeadline formats t the way mails and pages show deadlines, in UTC.
func FormatDeadline(t time.Time) string {
	return t.UTC().Format("Mon, 02 Jan 2006 15:04 UTC")
}

// PrettyArguments returns a call's JSON arguments indented for reading, with
// every string written again with the fewest escapes JSON needs: a model's
// or SDK's "\u003c", "\u0026" or "\u00e9" shows as the character it is, so
// the page, the mail and the CLI show approvers the literal text they
// approve (HTML escaping is the page's job, control characters CleanText's).
// Numbers keep their text. Input that is not valid JSON comes back as it is,
// and empty input as "{}".
func PrettyArguments(input json.RawMessage) string {
	if len(bytes.TrimSpace(input)) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	dec := jsontext.NewDecoder(bytes.NewReader(input))
	enc := jsontext.NewEncoder(&buf, jsontext.WithIndent("  "))
	for {
		var err error
		switch dec.PeekKind() {
		case '"':
			var tok jsontext.Token
			if tok, err = dec.ReadToken(); err == nil {
				err = enc.WriteToken(jsontext.String(tok.String()))
			}
		case '0':
			var v jsontext.Value
			if v, err = dec.ReadValue(); err == nil {
				err = enc.WriteValue(v)
			}
		default: // null, true, false, a delimiter; or an error
			var tok jsontext.Token
			if tok, err = dec.ReadToken(); err == nil {
				err = enc.WriteToken(tok)
			}
		}
		if err != nil {
			return string(input)
		}
		if dec.StackDepth() == 0 { // one whole value: nothing may follow
			if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
				return string(input)
			}
			return strings.TrimSuffix(buf.String(), "\n")
		}
	}
}

// CleanText makes text the model or a caller wrote safe to show to a human:
// CRLF becomes LF, invalid UTF-8 becomes U+FFFD, and control and format
// characters other than newline and tab (a lone CR, bidirectional overrides,
// zero-width characters) become visible \u escapes. It does not escape HTML;
// HTML does that.
func CleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// shownArguments is a call's arguments as the mail shows them: cut to
// ValueLimit, and, when the row's summary already shortened them, saying
// how large the whole input is (the approval page shows all of it): the
// summary's text is not the whole, so what is left of it is no count.
func shownArguments(c runs.CallSummary) string {
	s := CleanText(PrettyArguments(c.Input))
	if !c.InputTruncated {
		return truncate(s, ValueLimit)
	}
	return cutRunes(s, ValueLimit) + fmt.Sprintf("\n… (shortened: the whole input is %d bytes; the approval page shows all of it)", c.InputSize)
}

// shownPreview is a call's preview as the mail shows it: cut to
// ValueLimit; a preview the summary shortened ends in its own marker
// unless the mail cuts it, which then says how large the whole is.
func shownPreview(c runs.CallSummary) string {
	s := CleanText(c.Preview)
	if !c.PreviewTruncated || utf8.RuneCountInString(s) <= ValueLimit {
		return truncate(s, ValueLimit)
	}
	return cutRunes(s, ValueLimit) + fmt.Sprintf("… (shortened: the whole preview is %d bytes; the approval page shows all of it)", c.PreviewSize)
}

// cutRunes returns the first limit characters of s.
func cutRunes(s string, limit int) string {
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}

// truncate cuts s to at most limit characters, saying how many were left out.
func truncate(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	return cutRunes(s, limit) + fmt.Sprintf("… (%d more characters)", n-limit)
}

// oneLine replaces line breaks and tabs with spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// indent prefixes every line of s but the first with prefix.
func indent(prefix, s string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// RuleNote describes what a call's policy rule asks of its approval, for
// approvers (mail and page); for a call that needs none (an allow rule
// lets it run, or a deny rule refused it), what the rule is for.
func RuleNote(c runs.CallSummary) string {
	a := c.Approval
	if a == nil {
		return c.RuleDescription
	}
	var parts []string
	if a.Description != "" {
		parts = append(parts, a.Description)
	}
	if a.RequiredApprovals > 1 {
		parts = append(parts, fmt.Sprintf("needs %d approvals from distinct persons", a.RequiredApprovals))
	}
	if a.FourEyes {
		parts = append(parts, "four-eyes: not the initiator")
	}
	if len(a.Approvers) > 0 {
		parts = append(parts, "approvers: "+strings.Join(a.Approvers, ", "))
	}
	return strings.Join(parts, "; ")
}

// DefinitionNote tells approvers (mail, page and CLI) that a held call's
// tool could not be checked against its server when the turn was held
// (runs.CallSummary.DefinitionUnverified), so the definition they review
// (description, input schema, annotations) may be stale; "" for nil.
func DefinitionNote(u *loop.UnverifiedDefinition) string {
	if u == nil {
		return ""
	}
	shown := "You are shown the definition this process listed before."
	if !u.ListedAt.IsZero() {
		shown = "You are shown the definition listed at " + u.ListedAt.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC") + "."
	}
	return "The tool's definition could not be checked against the server when this turn was held: " +
		strings.TrimSuffix(oneLine(u.Reason), ".") + ". " + shown
}
