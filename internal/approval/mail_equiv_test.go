package approval

import (
	htmltemplate "html/template"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	texttemplate "text/template"
)

// The mails were rendered with text/template and html/template until those
// packages were dropped from the binaries (see HTML). The templates are kept
// in testdata, and these tests render random views both ways: the bytes
// must be the same, hostile and odd strings included.

var (
	refText = texttemplate.Must(texttemplate.New("mail.txt.tmpl").
		Funcs(texttemplate.FuncMap{"indent": indent}).
		ParseFiles(filepath.Join("testdata", "templates", "mail.txt.tmpl")))
	refHTML = htmltemplate.Must(htmltemplate.New("mail.html.tmpl").
		ParseFiles(filepath.Join("testdata", "templates", "mail.html.tmpl")))
)

// oddStrings are pieces random strings are made of: markup, quotes,
// entities, URL syntax, percent escapes, control and non-ASCII characters.
var oddStrings = []string{
	"", "a", "Z9", " ", "\n", "\t", "<", ">", "&", "\"", "'", "+", "\x00", "%", "%41", "%zz", "%4",
	"<script>alert(1)</script>", "&amp;", "&#34;", "javascript:", "http://", "https://x.example/a?b=c&d=e#f",
	"mailto:", "data:text/html,", "/", ":", "?", "#", "(", ")", "[", "]", "{", "}", "~", "`", "\\", "é", "日本",
	"\u202e", "\u2028", "\ufffd", "\xff", "\U0001F600", "{{.RunID}}", "--", "\r\n",
}

func randomString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(6); n > 0; n-- {
		b.WriteString(oddStrings[r.IntN(len(oddStrings))])
	}
	return b.String()
}

func randomMailView(r *rand.Rand) mailView {
	v := mailView{
		Subject: randomString(r), Reminder: r.IntN(2) == 0, RunID: randomString(r), SuspensionID: randomString(r),
		Approver: randomString(r), Initiator: randomString(r), Purpose: randomString(r), Deadline: randomString(r),
		Link: randomString(r),
	}
	if r.IntN(2) == 0 {
		v.Link = "https://approvals.example.com/prod/approvals/" + randomString(r)
	}
	if r.IntN(2) == 0 {
		v.Voting, v.VotesNeeded, v.Voted, v.StillNeeded = r.IntN(4) > 0, r.IntN(4), randomString(r), randomString(r)
		v.SameNeeds, v.More = r.IntN(2) == 0, randomString(r)
	}
	for i := range r.IntN(4) {
		c := callView{Number: i + 1, ID: randomString(r), Tool: randomString(r), NeedsApproval: r.IntN(2) == 0,
			Arguments: randomString(r)}
		if r.IntN(2) == 0 {
			c.Effect = randomString(r)
		}
		if r.IntN(2) == 0 {
			c.Preview = randomString(r)
		}
		if r.IntN(2) == 0 {
			c.Rule, c.RuleNote = randomString(r), randomString(r)
		}
		if r.IntN(3) == 0 {
			c.Denied = randomString(r)
		}
		if r.IntN(3) == 0 {
			c.DefinitionNote = randomString(r)
		}
		if c.NeedsApproval {
			v.NeedApproval++
			c.Others = r.IntN(2) == 0
		}
		v.Calls = append(v.Calls, c)
	}
	return v
}

func TestMailMatchesFormerTemplates(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 1))
	for i := range 3000 {
		v := randomMailView(r)
		var text, html strings.Builder
		if err := refText.Execute(&text, v); err != nil {
			t.Fatal(err)
		}
		if err := refHTML.Execute(&html, v); err != nil {
			t.Fatal(err)
		}
		if got := v.text(); got != text.String() {
			t.Fatalf("view %d %+v: text differs\n--- got ---\n%s\n--- template ---\n%s", i, v, got, text.String())
		}
		if got := v.html(); got != html.String() {
			t.Fatalf("view %d %+v: html differs\n--- got ---\n%s\n--- template ---\n%s", i, v, got, html.String())
		}
	}
}
