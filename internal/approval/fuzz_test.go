package approval_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/runs"
)

// FuzzHashToken: a link token is accepted only in the one spelling
// NewToken produces (43 characters of unpadded base64url of 32 bytes,
// unused bits clear), and its hash is the SHA-256 hex of exactly that
// spelling.
func FuzzHashToken(f *testing.F) {
	f.Add(sampleToken)
	for range 4 {
		raw, _, err := approval.NewToken()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
		f.Add(raw + "=")
		f.Add(strings.ToUpper(raw))
		f.Add(raw[:42] + "B")
	}
	f.Add("")
	f.Add(strings.Repeat("ab", 32))
	f.Fuzz(func(t *testing.T, raw string) {
		hash, ok := approval.HashToken(raw)
		if ok != approval.WellFormed(raw) {
			t.Fatalf("HashToken ok = %v, WellFormed = %v for %q", ok, !ok, raw)
		}
		if !ok {
			if hash != "" {
				t.Fatalf("HashToken(%q) refused the token but returned hash %q", raw, hash)
			}
			return
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(raw)
		if err != nil || len(b) != approval.TokenBytes {
			t.Fatalf("accepted token %q decodes to %d bytes, %v; want %d bytes", raw, len(b), err, approval.TokenBytes)
		}
		if again := base64.RawURLEncoding.EncodeToString(b); again != raw {
			t.Fatalf("accepted token %q is not canonical: its bytes encode as %q", raw, again)
		}
		sum := sha256.Sum256([]byte(raw))
		if want := hex.EncodeToString(sum[:]); hash != want {
			t.Fatalf("HashToken(%q) = %q, want %q", raw, hash, want)
		}
	})
}

// FuzzCheckAddress: an accepted approver address is one plain addr-spec
// that net/mail reads back as itself, in printable ASCII: nothing a header
// could be split or disguised with.
func FuzzCheckAddress(f *testing.F) {
	for _, s := range []string{
		"ops@example.com", "Ann+x@Example.com", "a.b-c_d@sub.example.co.uk", "ü@例え.jp",
		"Ann <ann@example.com>", "ann@example.com\r\nBcc: x@example.com", "ann@example.com\u2028",
		"\"a b\"@example.com", "a@b@c", "(comment)ann@example.com", "ann@[127.0.0.1]", "ann@example.com,bob@example.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if approval.CheckAddress(s) != nil {
			return
		}
		a, err := mail.ParseAddress(s)
		if err != nil || a.Name != "" || a.Address != s {
			t.Fatalf("accepted %q, but net/mail reads it as %+v, %v", s, a, err)
		}
		if len(s) > approval.MaxAddressLength || !utf8.ValidString(s) {
			t.Fatalf("accepted %q: %d bytes, valid UTF-8 %v", s, len(s), utf8.ValidString(s))
		}
		for _, r := range s {
			if r <= ' ' || r > '~' {
				t.Fatalf("accepted %q with %U: not printable ASCII", s, r)
			}
		}
		list, err := mail.ParseAddressList(s)
		if err != nil || len(list) != 1 || list[0].Address != s {
			t.Fatalf("accepted %q, but as a To: list it is %v, %v", s, list, err)
		}
	})
}

// tagPattern finds the start of every element in HTML.
var tagPattern = regexp.MustCompile(`<[!/]?[A-Za-z][A-Za-z0-9]*`)

func tags(html string) []string { return tagPattern.FindAllString(html, -1) }

// shadow returns s with every character replaced by "x", keeping
// emptiness: the templates branch on emptiness only.
func shadow(s string) string {
	if s == "" {
		return ""
	}
	return "x"
}

// FuzzCompose: whatever text the model or a caller wrote (tool names, call
// ids, arguments, previews, purpose, initiator), the approval mail has a
// one-line subject, bodies without control or format characters, HTML
// whose elements are exactly the template's (every value escaped), and an
// .eml with exactly the expected headers that read back to what Compose
// returned: no header injection, valid MIME.
func FuzzCompose(f *testing.F) {
	s := sampleMessage()
	w := s.Calls[0]
	f.Add(s.RunID, s.Approver, s.Initiator, s.Purpose, w.Tool, w.ID, string(w.Input), w.Preview, s.Link, false, true)
	f.Add(s.RunID, s.Approver, s.Initiator, s.Purpose, w.Tool, w.ID, string(w.Input), w.Preview, s.Link, true, false)
	f.Add("run_\r\nBcc: x@example.com", "bob@example.com", "<b>eve</b>", "\u202eevil\u202c\r\n.\r\n", "x\r\nBcc: evil@example.com",
		"toolu_</pre><script>", `{"a":"<script>alert(1)</script>"}`, "-<ops>\n+\x00\x1b[31m", "https://gate.example.com/approvals/\"><script>", true, true)
	f.Add("=?utf-8?q?Approved?=", "ops@example.com", "", strings.Repeat("é", 400), strings.Repeat("😀", 70), "", "not json {", "", "http://x", false, true)
	f.Fuzz(func(t *testing.T, runID, approver, initiator, purpose, tool, callID, input, preview, link string, reminder, needs bool) {
		m := approval.Message{
			RunID: runID, SuspensionID: "susp_1", Approver: approver, Initiator: initiator, Purpose: purpose,
			Calls: []runs.CallSummary{
				{ID: callID, Tool: tool, Input: json.RawMessage(input), NeedsApproval: needs, Effect: "write", Preview: preview},
				{ID: "toolu_read", Tool: "read_document", Input: json.RawMessage(`{"path":"a.md"}`), Effect: "read"},
			},
			Deadline: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC), Link: link, Reminder: reminder,
		}
		subject, text, html, err := approval.Compose(m)
		if verr := m.Validate(); (err != nil) != (verr != nil) {
			t.Fatalf("Compose error %v, Validate error %v", err, verr)
		}
		if err != nil {
			return
		}
		if !utf8.ValidString(subject) || strings.ContainsFunc(subject, unicode.IsControl) || utf8.RuneCountInString(subject) > 200 ||
			strings.Contains(subject, "=?") {
			t.Fatalf("subject is not one short line of text: %q", subject)
		}
		for name, body := range map[string]string{"text": text, "html": html} {
			if !utf8.ValidString(body) {
				t.Fatalf("%s body is not valid UTF-8", name)
			}
			if i := strings.IndexFunc(body, func(r rune) bool {
				return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029')
			}); i >= 0 {
				t.Fatalf("%s body has a control or format character at %d: %q", name, i, body[i:min(len(body), i+20)])
			}
		}
		// The same message with harmless values renders the same elements:
		// nothing the hostile values carried became markup.
		benign := m
		benign.RunID, benign.Initiator, benign.Purpose, benign.Link = shadow(runID), shadow(initiator), shadow(purpose), "https://x"
		benign.Calls = slices.Clone(m.Calls)
		benign.Calls[0].ID, benign.Calls[0].Tool, benign.Calls[0].Preview = shadow(callID), shadow(tool), shadow(preview)
		benign.Calls[0].Input = json.RawMessage(`{}`)
		_, _, benignHTML, err := approval.Compose(benign)
		if err != nil {
			t.Fatalf("compose the benign shadow: %v", err)
		}
		if got, want := tags(html), tags(benignHTML); !slices.Equal(got, want) {
			t.Fatalf("the values changed the HTML's elements:\n got %q\nwant %q", got, want)
		}
		checkEML(t, m, subject, text, html)
	})
}

// checkEML writes m through the outbox mailer and checks the .eml.
func checkEML(t *testing.T, m approval.Message, subject, text, html string) {
	t.Helper()
	dir := t.TempDir()
	if err := approval.NewOutboxMailer(dir, "agentgate@localhost", nil).Send(t.Context(), m); err != nil {
		t.Fatalf("outbox Send: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("outbox holds %v, %v; want one .eml", files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("the .eml has no header/body separator")
	}
	for i, line := range bytes.Split(head, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("header line %d is %d bytes, over RFC 5322's 998", i, len(line))
		}
		if bytes.ContainsAny(line, "\r\n") || bytes.ContainsFunc(line, func(r rune) bool { return r >= utf8.RuneSelf || r < ' ' && r != '\t' }) {
			t.Fatalf("header line %d is not printable ASCII: %q", i, line)
		}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("read the .eml: %v", err)
	}
	want := []string{"Auto-Submitted", "Content-Type", "Date", "From", "Message-Id", "Mime-Version", "Subject", "To", "X-Agentgate-Run"}
	var got []string
	for k, vs := range msg.Header {
		if len(vs) != 1 {
			t.Fatalf("header %s appears %d times", k, len(vs))
		}
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	to, err := mail.ParseAddressList(msg.Header.Get("To"))
	if err != nil || len(to) != 1 || to[0].Address != m.Approver {
		t.Fatalf("To: %q reads as %v, %v; want %q only", msg.Header.Get("To"), to, err, m.Approver)
	}
	dec := new(mime.WordDecoder)
	if s, err := dec.DecodeHeader(msg.Header.Get("Subject")); err != nil || s != subject {
		t.Fatalf("Subject: reads as %q, %v; want %q", s, err, subject)
	}
	if s, err := dec.DecodeHeader(msg.Header.Get("X-Agentgate-Run")); err != nil || strings.ContainsFunc(s, unicode.IsControl) {
		t.Fatalf("X-Agentgate-Run: reads as %q, %v", s, err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var parts []string
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("part %d: %v", len(parts), err)
		}
		if p.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
			t.Fatalf("part %d is not quoted-printable", len(parts))
		}
		b, err := io.ReadAll(quotedprintable.NewReader(p))
		if err != nil {
			t.Fatalf("part %d: quoted-printable: %v", len(parts), err)
		}
		// Text parts have CRLF line breaks on the wire (RFC 2045).
		parts = append(parts, p.Header.Get("Content-Type"), strings.ReplaceAll(string(b), "\r\n", "\n"))
	}
	if want := []string{"text/plain; charset=utf-8", text, "text/html; charset=utf-8", html}; !slices.Equal(parts, want) {
		t.Fatalf("the .eml's parts do not read back to the composed text and HTML")
	}
}
