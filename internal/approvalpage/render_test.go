package approvalpage

import (
	"html/template"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// The pages were rendered with html/template until it was dropped from the
// binaries (see approval.HTML). The templates are kept in testdata, and this
// test renders random views both ways: the bytes must be the same, hostile
// and odd strings included.

func formerTemplate(t *testing.T, name string) *template.Template {
	t.Helper()
	dir := filepath.Join("testdata", "templates")
	layout := template.Must(template.ParseFiles(filepath.Join(dir, "layout.html.tmpl")))
	return template.Must(template.Must(layout.Clone()).ParseFiles(filepath.Join(dir, name)))
}

var oddStrings = []string{
	"", "a", "Z9", " ", "\n", "\t", "<", ">", "&", "\"", "'", "+", "\x00", "%", "%41", "%zz", "%4",
	"<script>alert(1)</script>", "&amp;", "&#34;", "javascript:", "http://", "https://x.example/a?b=c&d=e#f",
	"mailto:", "/prod/approvals/", ":", "?", "#", "(", ")", "[", "]", "{", "}", "~", "`", "\\", "é", "日本",
	"\u202e", "\u2028", "\ufffd", "\xff", "\U0001F600", "{{.RunID}}", "--", "\r\n", "—",
}

func randomString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(6); n > 0; n-- {
		b.WriteString(oddStrings[r.IntN(len(oddStrings))])
	}
	return b.String()
}

func randomConfirm(r *rand.Rand) confirmView {
	v := confirmView{
		Title: randomString(r), RunID: randomString(r), Initiator: randomString(r), Purpose: randomString(r),
		Approver: randomString(r), Deadline: randomString(r), TurnDigest: randomString(r), MaxReason: r.IntN(5000),
	}
	if r.IntN(3) > 0 {
		v.FormAction = randomString(r)
	}
	if r.IntN(2) == 0 {
		v.Voting, v.VotesNeeded, v.Voted, v.StillNeeded = r.IntN(4) > 0, r.IntN(4), randomString(r), randomString(r)
		v.SameNeeds, v.More = r.IntN(2) == 0, randomString(r)
	}
	for i := range r.IntN(4) {
		c := callView{Number: i + 1, ID: randomString(r), DisplayID: randomString(r), Tool: randomString(r),
			NeedsApproval: r.IntN(2) == 0, Arguments: randomString(r)}
		c.Mine = c.NeedsApproval && r.IntN(3) > 0
		if c.Mine {
			v.Mine++
		}
		if r.IntN(3) == 0 {
			c.Progress = randomString(r)
		}
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
		if r.IntN(3) == 0 {
			c.InputURL, c.InputSize = randomURL(r), r.IntN(1<<22)
		}
		if r.IntN(3) == 0 {
			c.PreviewURL, c.PreviewSize = randomURL(r), r.IntN(1<<22)
		}
		if c.NeedsApproval {
			v.NeedApproval++
		}
		v.Calls = append(v.Calls, c)
	}
	v.PerCall = v.NeedApproval > 1
	return v
}

// randomURL is a held-text link (HeldTextURL) or a random string.
func randomURL(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return HeldTextURL(randomString(r), randomString(r), r.IntN(3)*1000)
	}
	return randomString(r)
}

func randomText(r *rand.Rand) textView {
	v := textView{Title: randomString(r), RunID: randomString(r), CallID: randomString(r), Tool: randomString(r),
		Part: randomString(r), Size: r.IntN(1 << 22), From: r.IntN(1 << 20), To: r.IntN(1 << 21), Text: randomString(r)}
	if r.IntN(2) == 0 {
		v.NextURL = randomURL(r)
	}
	return v
}

func randomOutcome(r *rand.Rand) outcomeView {
	v := outcomeView{Title: randomString(r)}
	if r.IntN(2) == 0 {
		v.RunID = randomString(r)
	}
	for range r.IntN(3) {
		v.Paragraphs = append(v.Paragraphs, randomString(r))
	}
	for range r.IntN(3) {
		c := outcomeCall{ID: randomString(r), Tool: randomString(r), Outcome: randomString(r)}
		if r.IntN(2) == 0 {
			c.Reason = randomString(r)
		}
		v.Calls = append(v.Calls, c)
	}
	return v
}

func TestPagesMatchFormerTemplates(t *testing.T) {
	confirm, outcome, text := formerTemplate(t, "confirm.html.tmpl"), formerTemplate(t, "outcome.html.tmpl"), formerTemplate(t, "text.html.tmpl")
	r := rand.New(rand.NewPCG(15, 2))
	for i := range 2000 {
		cv, ov, tv := randomConfirm(r), randomOutcome(r), randomText(r)
		var want strings.Builder
		if err := confirm.ExecuteTemplate(&want, "layout", cv); err != nil {
			t.Fatal(err)
		}
		if got := cv.render(); got != want.String() {
			t.Fatalf("confirm view %d %+v differs\n--- got ---\n%s\n--- template ---\n%s", i, cv, got, want.String())
		}
		want.Reset()
		if err := outcome.ExecuteTemplate(&want, "layout", ov); err != nil {
			t.Fatal(err)
		}
		if got := ov.render(); got != want.String() {
			t.Fatalf("outcome view %d %+v differs\n--- got ---\n%s\n--- template ---\n%s", i, ov, got, want.String())
		}
		want.Reset()
		if err := text.ExecuteTemplate(&want, "layout", tv); err != nil {
			t.Fatal(err)
		}
		if got := tv.render(); got != want.String() {
			t.Fatalf("text view %d %+v differs\n--- got ---\n%s\n--- template ---\n%s", i, tv, got, want.String())
		}
	}
}
