package approval_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, rewriting the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept)\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func TestComposeGolden(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*approval.Message)
	}{
		{"mail.txt", func(*approval.Message) {}},
		{"reminder.txt", func(m *approval.Message) { m.Reminder = true; m.Calls = m.Calls[:1] }},
		{"unverified.txt", func(m *approval.Message) {
			m.Calls = m.Calls[:1]
			m.Calls[0].DefinitionUnverified = &loop.UnverifiedDefinition{Reason: "the connection was refused",
				ListedAt: time.Date(2026, 3, 14, 9, 5, 7, 0, time.UTC)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleMessage()
			tt.modify(&m)
			subject, text, html, err := approval.Compose(m)
			if err != nil {
				t.Fatalf("Compose: %v", err)
			}
			golden(t, tt.name, "Subject: "+subject+"\n\n"+text)
			golden(t, strings.TrimSuffix(tt.name, ".txt")+".html", html)
		})
	}
}

func TestComposeSubject(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*approval.Message)
		want   string
	}{
		{"one call", func(*approval.Message) {}, "Approval needed: write_document (run run_01HZX3)"},
		{"reminder", func(m *approval.Message) { m.Reminder = true }, "Reminder: Approval needed: write_document (run run_01HZX3)"},
		{"two calls", func(m *approval.Message) { m.Calls[1].NeedsApproval = true }, "Approval needed: 2 tool calls (run run_01HZX3)"},
		{"header injection", func(m *approval.Message) { m.Calls[0].Tool = "x\r\nBcc: evil@example.com" },
			"Approval needed: x Bcc: evil@example.com (run run_01HZX3)"},
		// Found by FuzzCompose: a mail reader decodes "=?...?=" in a
		// subject as an encoded word, showing other text than the tool's.
		{"encoded word", func(m *approval.Message) { m.Calls[0].Tool = "=?utf-8?q?nothing?=" },
			"Approval needed: = ?utf-8?q?nothing?= (run run_01HZX3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleMessage()
			tt.modify(&m)
			subject, _, _, err := approval.Compose(m)
			if err != nil {
				t.Fatalf("Compose: %v", err)
			}
			if subject != tt.want {
				t.Errorf("subject = %q, want %q", subject, tt.want)
			}
		})
	}
}

func TestComposeEscapes(t *testing.T) {
	const hostile = `<script>alert("pwn")</script><img src=x onerror=alert(1)>`
	m := sampleMessage()
	m.Initiator = hostile
	m.Purpose = hostile
	m.Calls = []runs.CallSummary{{
		ID:            `id"><script>1</script>`,
		Tool:          "<b>tool</b>",
		Input:         mustJSON(t, map[string]string{"content": hostile}),
		NeedsApproval: true,
		Preview:       "-old\n+" + hostile + "\u202etxt.exe",
		// The note's reason is a fixed phrase of agentgate's, but is
		// escaped like everything else.
		DefinitionUnverified: &loop.UnverifiedDefinition{Reason: hostile},
	}}
	_, text, html, err := approval.Compose(m)
	if err != nil {
		t.Fatalf("Compose: %v", err)
	}
	for _, bad := range []string{"<script", "<img", "<b>", "\u202e"} {
		if strings.Contains(html, bad) {
			t.Errorf("HTML part contains %q unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&lt;b&gt;tool&lt;/b&gt;", "id&#34;&gt;&lt;script&gt;1&lt;/script&gt;", `\u202e`} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML part lacks the escaped form %q", want)
		}
	}
	// The text part is text/plain: hostile markup stays literal text (no
	// mail client renders it), and only invisible characters are escaped.
	if !strings.Contains(html, "when this turn was held: &lt;script&gt;") {
		t.Error("HTML part lacks the definition note with its reason escaped")
	}
	for _, want := range []string{hostile, "<b>tool</b>", `\u202etxt.exe`, "    note: The tool's definition could not be checked against the server when this turn was held: " + hostile + ". You are shown the definition this process listed before."} {
		if !strings.Contains(text, want) {
			t.Errorf("text part lacks %q as literal text", want)
		}
	}
	if strings.Contains(text, "\u202e") {
		t.Error("text part contains a raw right-to-left override")
	}
	if strings.Contains(text, "&lt;") {
		t.Error("text part is HTML-escaped; it should show the characters as they are")
	}
}

func TestComposeHTMLIsStatic(t *testing.T) {
	_, _, html, err := approval.Compose(sampleMessage())
	if err != nil {
		t.Fatal(err)
	}
	lower := strings.ToLower(html)
	for _, bad := range []string{"<script", "<img", "<link", "<iframe", "<style", "javascript:", " onload=", " onclick="} {
		if strings.Contains(lower, bad) {
			t.Errorf("HTML part contains %q; want inline styles and no scripts or external resources", bad)
		}
	}
}

func TestComposeLimits(t *testing.T) {
	m := sampleMessage()
	m.Purpose = strings.Repeat("p", 1000)
	m.Calls[0].Preview = strings.Repeat("d", approval.ValueLimit+10)
	_, text, _, err := approval.Compose(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, strings.Repeat("p", approval.PurposeLimit)+"… (700 more characters)") {
		t.Error("purpose not cut at PurposeLimit with a note")
	}
	if strings.Contains(text, strings.Repeat("p", approval.PurposeLimit+1)) {
		t.Error("purpose longer than PurposeLimit")
	}
	if !strings.Contains(text, "… (10 more characters)") {
		t.Error("preview not cut at ValueLimit with a note")
	}
}

func TestComposeInvalid(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*approval.Message)
	}{
		{"no run id", func(m *approval.Message) { m.RunID = "" }},
		{"no approver", func(m *approval.Message) { m.Approver = "" }},
		{"approver not an address", func(m *approval.Message) { m.Approver = "alice" }},
		{"approver with header", func(m *approval.Message) { m.Approver = "a@example.com\r\nBcc: b@example.com" }},
		{"no link", func(m *approval.Message) { m.Link = "" }},
		{"javascript link", func(m *approval.Message) { m.Link = "javascript:alert(1)" }},
		// Found by FuzzCompose: the link went raw into both bodies.
		{"link with a control character", func(m *approval.Message) { m.Link = "http://\x10" }},
		{"link with a line break", func(m *approval.Message) { m.Link = "https://gate.example.com/approvals/x\nBcc: evil@example.com" }},
		{"link with a space", func(m *approval.Message) { m.Link = "https://gate.example.com/approvals/x y" }},
		{"link without a host", func(m *approval.Message) { m.Link = "https:///approvals/x" }},
		{"link with user info", func(m *approval.Message) { m.Link = "https://gate.example.com@evil.example.com/approvals/x" }},
		{"no deadline", func(m *approval.Message) { m.Deadline = time.Time{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleMessage()
			tt.modify(&m)
			if _, _, _, err := approval.Compose(m); err == nil {
				t.Error("Compose: got nil error, want one")
			}
		})
	}
}

func TestPrettyArguments(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"a":1,"b":[true]}`, "{\n  \"a\": 1,\n  \"b\": [\n    true\n  ]\n}"},
		{``, `{}`},
		{`not json <x>`, `not json <x>`},
		// Escapes an encoder chose are undone; numbers keep their text.
		{`{"cmd":"make \u0026\u0026 rm \u003c in \u003e out","name":"caf\u00e9","n":1.50e3}`,
			"{\n  \"cmd\": \"make && rm < in > out\",\n  \"name\": \"café\",\n  \"n\": 1.50e3\n}"},
		// What JSON must escape stays escaped.
		{`{"q":"say \"hi\"\\ \u0007"}`, "{\n  \"q\": \"say \\\"hi\\\"\\\\ \\u0007\"\n}"},
		{`["x"]`, "[\n  \"x\"\n]"},
		{`"s"`, `"s"`},
		// Not one JSON value: shown as it came.
		{`{"a":1} {"b":2}`, `{"a":1} {"b":2}`},
		{`{"a":`, `{"a":`},
		{"{\"a\":\"\xff\"}", "{\"a\":\"\xff\"}"},
	}
	for _, tt := range tests {
		if got := approval.PrettyArguments(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("PrettyArguments(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestComposeLabelsCallsThePolicyDenied: a call the policy denied is
// labelled so in both parts, not "runs without approval" beside its denial.
func TestComposeLabelsCallsThePolicyDenied(t *testing.T) {
	m := sampleMessage()
	m.Calls = m.Calls[:1]
	m.Calls[0].NeedsApproval = false
	m.Calls[0].Denied = "production documents are never deleted by an agent"
	_, text, html, err := approval.Compose(m)
	if err != nil {
		t.Fatal(err)
	}
	for part, body := range map[string]string{"text": text, "html": html} {
		if !strings.Contains(body, "denied by policy") || strings.Contains(body, "runs without approval") {
			t.Errorf("%s part: want the call labelled denied by policy, not runs without approval:\n%s", part, body)
		}
	}
}

// TestComposeLabelsCallsThatCannotRun: a call that needs no approval and
// cannot run (an unknown tool) is labelled so in both parts, with why, not
// "runs without approval".
func TestComposeLabelsCallsThatCannotRun(t *testing.T) {
	m := sampleMessage()
	m.Calls = m.Calls[:1]
	m.Calls[0].NeedsApproval = false
	m.Calls[0].Rejected = `unknown tool "no_such_tool"`
	_, text, html, err := approval.Compose(m)
	if err != nil {
		t.Fatal(err)
	}
	for part, body := range map[string]string{"text": text, "html": strings.ReplaceAll(html, "&#34;", `"`)} {
		if !strings.Contains(body, "cannot run") || !strings.Contains(body, `unknown tool "no_such_tool"`) || strings.Contains(body, "runs without approval") {
			t.Errorf("%s part: want the call labelled cannot run with why, not runs without approval:\n%s", part, body)
		}
	}
}

// TestComposeSaysHowLargeTheWholeIs: the mail cuts what the row's summary
// had already shortened; it says how large the whole input and preview
// are, not how much of the summary's shortened text it left out (it said
// "8471 more characters" of a 58,941-byte preview).
func TestComposeSaysHowLargeTheWholeIs(t *testing.T) {
	m := sampleMessage()
	m.Calls = m.Calls[:1]
	c := &m.Calls[0]
	c.Preview = strings.Repeat("+ line\n", 2400) + "\n… [preview cut here: 16800 of 58941 bytes shown; the call's full preview has the rest]"
	c.PreviewTruncated, c.PreviewSize = true, 58941
	c.Input = json.RawMessage(`{"path":"pages/a.md","text":"` + strings.Repeat("A", 4096) + `…"}`)
	c.InputTruncated, c.InputSize = true, 20034
	_, text, html, err := approval.Compose(m)
	if err != nil {
		t.Fatal(err)
	}
	for part, body := range map[string]string{"text": text, "html": html} {
		for _, want := range []string{"the whole preview is 58941 bytes", "the whole input is 20034 bytes"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s part lacks %q", part, want)
			}
		}
		if strings.Contains(body, "more characters") {
			t.Errorf("%s part counts the characters left of a shortened text", part)
		}
	}
}

// TestComposeQuorumProgress: under a quorum the mail says how many
// approvals are needed and, where the held calls differ or votes were
// cast, what each open call still needs; when every call needs the same
// and nobody voted, the one number says it all.
func TestComposeQuorumProgress(t *testing.T) {
	tests := []struct {
		name     string
		progress []approval.CallProgress
		voted    []string
		want     []string
		absent   []string
	}{
		{"the same for each call, no votes yet",
			[]approval.CallProgress{{ID: "a", Tool: "write_document", Needed: 2, StillNeeded: 2}, {ID: "b", Tool: "send_email", Needed: 2, StillNeeded: 2}}, nil,
			[]string{"2 approvals from distinct persons are needed"}, []string{"Needed:", "Still needed", "its own number"}},
		{"calls that differ",
			[]approval.CallProgress{{ID: "a", Tool: "write_document", Needed: 1, StillNeeded: 1}, {ID: "b", Tool: "send_email", Needed: 2, StillNeeded: 2}}, nil,
			[]string{"each call needs its own number of approvals from distinct persons, up to 2", "1 more approval of write_document and 2 more of send_email"},
			[]string{"2 approvals from distinct persons are needed"}},
		{"a vote cast",
			[]approval.CallProgress{{ID: "a", Tool: "write_document", Needed: 2, Approvals: 1, StillNeeded: 1}, {ID: "b", Tool: "send_email", Needed: 2, StillNeeded: 2}},
			[]string{"ann@example.com"},
			[]string{"2 approvals from distinct persons are needed; so far: ann@example.com", "1 more approval of write_document and 2 more of send_email"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleMessage()
			m.Voting, m.VotesNeeded, m.Progress, m.Voted = true, 2, tt.progress, tt.voted
			_, text, html, err := approval.Compose(m)
			if err != nil {
				t.Fatal(err)
			}
			html = strings.ReplaceAll(strings.ReplaceAll(html, "<strong>", ""), "</strong>", "")
			for part, body := range map[string]string{"text": text, "html": html} {
				for _, w := range tt.want {
					if !strings.Contains(strings.ToLower(body), strings.ToLower(w)) {
						t.Errorf("%s part lacks %q:\n%s", part, w, body)
					}
				}
				for _, a := range tt.absent {
					if strings.Contains(body, a) {
						t.Errorf("%s part has %q:\n%s", part, a, body)
					}
				}
			}
		})
	}
}
