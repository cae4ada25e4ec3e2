package approvalpage

import "github.com/agentgate/agentgate/internal/approval"

// pageHead is the start of every page, up to its title.
const pageHead = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
	"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n" +
	"<meta name=\"referrer\" content=\"no-referrer\">\n<meta name=\"robots\" content=\"noindex, nofollow\">\n<title>"

// pageStyle is the style sheet of every page (inline: the pages load
// nothing).
const pageStyle = "<style>\n" +
	"*{box-sizing:border-box}\n" +
	"body{margin:0;background:#f4f4f5;color:#18181b;font:16px/1.45 -apple-system,\"Segoe UI\",Helvetica,Arial,sans-serif}\n" +
	"main{max-width:720px;margin:0 auto;padding:16px}\n" +
	".card{background:#fff;border:1px solid #e4e4e7;border-radius:8px;padding:16px;margin:0 0 16px}\n" +
	"h1{font-size:22px;margin:0 0 12px}\n" +
	"h2{font-size:17px;margin:0 0 8px}\n" +
	"dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;margin:0}\n" +
	"dt{color:#52525b}\n" +
	"dd{margin:0;word-break:break-word;white-space:pre-wrap}\n" +
	"pre{margin:4px 0 8px;padding:8px;background:#f4f4f5;border-radius:4px;font:13px/1.4 Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-word;max-height:60vh;overflow:auto}\n" +
	"code,.mono{font-family:Menlo,Consolas,monospace}\n" +
	".call{border:1px solid #e4e4e7;border-radius:6px;padding:12px;margin:0 0 12px}\n" +
	".tag{display:inline-block;padding:1px 6px;border-radius:4px;font-size:12px;background:#e4e4e7}\n" +
	".tag.need{background:#fee2e2}\n" +
	".muted{color:#52525b;font-size:14px}\n" +
	"label{display:block;margin:8px 0 4px}\n" +
	"textarea{width:100%;min-height:4em;font:inherit;padding:6px;border:1px solid #a1a1aa;border-radius:4px}\n" +
	".choice label{display:inline-block;margin:4px 16px 4px 0}\n" +
	".buttons{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0 0}\n" +
	"button{font:inherit;font-weight:bold;padding:12px 20px;border:0;border-radius:6px;cursor:pointer;min-width:8em}\n" +
	".approve{background:#15803d;color:#fff}\n" +
	".deny{background:#dc2626;color:#fff}\n" +
	".percall{background:#2563eb;color:#fff}\n" +
	".notice{padding:8px 12px;border-radius:6px;background:#fef3c7}\n" +
	"</style>\n"

// layout renders a page: the head with title, then content's markup
// inside <main>.
func layout(title string, content func(h *approval.HTML)) string {
	var h approval.HTML
	h.Raw(pageHead)
	h.Text(title)
	h.Raw(" · agentgate</title>\n" + pageStyle + "</head>\n<body>\n<main>\n")
	content(&h)
	h.Raw("\n</main>\n</body>\n</html>\n")
	return h.String()
}

// render renders the confirmation page.
func (v confirmView) render() string {
	return layout(v.Title, func(h *approval.HTML) {
		h.Raw("<div class=\"card\">\n<h1>Approve or deny this agent run's next step</h1>\n<dl>\n<dt>Run</dt><dd class=\"mono\">")
		h.Text(v.RunID)
		h.Raw("</dd>\n<dt>Started by</dt><dd>")
		h.Text(v.Initiator)
		h.Raw("</dd>\n<dt>Purpose</dt><dd>")
		h.Text(v.Purpose)
		h.Raw("</dd>\n<dt>Deciding as</dt><dd>")
		h.Text(v.Approver)
		h.Raw("</dd>\n<dt>Decide by</dt><dd><strong>")
		h.Text(v.Deadline)
		h.Raw("</strong></dd>")
		if v.Voting {
			h.Raw("\n<dt>Approvals</dt><dd><strong>")
			switch {
			case v.VotesNeeded <= 1:
				// No one person may decide every held call.
				h.Raw("Each call is decided by its own approvers</strong>, one approval each")
			case v.SameNeeds:
				h.Int(v.VotesNeeded)
				h.Raw(" approvals</strong> from distinct persons for each call")
			default:
				h.Raw("Each call needs its own number of approvals</strong> from distinct persons, up to ")
				h.Int(v.VotesNeeded)
			}
			if v.Voted != "" {
				h.Raw(" (approved so far by: ")
				h.Text(v.Voted)
				h.Raw(")")
			}
			h.Raw("; you vote on the calls you may decide")
			if v.Mine < v.NeedApproval {
				h.Raw(" (")
				h.Int(v.Mine)
				h.Raw(" of ")
				h.Int(v.NeedApproval)
				h.Raw(")")
			}
			h.Raw(", and one denial denies a call</dd>")
			for _, row := range [][2]string{{"Still needed", v.More}, {"Who may still vote", v.StillNeeded}} {
				if row[1] != "" {
					h.Raw("\n<dt>" + row[0] + "</dt><dd>") // the labels are constants
					h.Text(row[1])
					h.Raw("</dd>")
				}
			}
		}
		h.Raw("\n</dl>\n</div>\n<form method=\"post\"")
		if v.FormAction != "" {
			h.Raw(" action=\"")
			h.URL(v.FormAction)
			h.Raw("\"")
		}
		h.Raw(" enctype=\"application/x-www-form-urlencoded\">\n<input type=\"hidden\" name=\"digest\" value=\"")
		h.Text(v.TurnDigest)
		h.Raw("\">\n<div class=\"card\">\n<h2>Pending calls: ")
		h.Int(len(v.Calls))
		h.Raw(" (")
		h.Int(v.NeedApproval)
		if v.NeedApproval == 1 {
			h.Raw(" needs approval)</h2>")
		} else {
			h.Raw(" need approval)</h2>")
		}
		for _, c := range v.Calls {
			v.renderCall(h, c)
		}
		h.Raw("\n</div>\n<div class=\"card\">\n<h2>")
		if v.PerCall {
			h.Raw("Decide the whole turn")
		} else {
			h.Raw("Decide")
		}
		h.Raw("</h2>\n<label for=\"message\">Reason if you deny (optional, shown to the agent), or a note on your approval (kept with the decision)</label>\n" +
			"<textarea id=\"message\" name=\"message\" maxlength=\"")
		h.Int(v.MaxReason)
		h.Raw("\"></textarea>\n<div class=\"buttons\">\n<button type=\"submit\" name=\"action\" value=\"approve\" class=\"approve\" formnovalidate>Approve")
		if v.PerCall {
			h.Raw(" all")
		}
		h.Raw("</button>\n<button type=\"submit\" name=\"action\" value=\"deny\" class=\"deny\" formnovalidate>Deny")
		if v.PerCall {
			h.Raw(" all")
		}
		h.Raw("</button>\n</div>")
		note := ""
		switch {
		case v.Voting:
			note = " denies the calls you may decide; the other calls are decided by their own approvers.</p>"
		case v.Unasked > 0:
			note = " stops every call of this turn, also those that would run without approval.</p>"
		}
		if note != "" {
			h.Raw("\n<p class=\"muted\">Deny")
			if v.PerCall {
				h.Raw(" all")
			}
			h.Raw(note)
		}
		if v.PerCall {
			h.Raw("\n<p class=\"muted\">Or decide each call above, then:</p>\n<div class=\"buttons\">\n" +
				"<button type=\"submit\" name=\"action\" value=\"per_call\" class=\"percall\">Submit per-call decisions</button>\n</div>")
		}
		h.Raw("\n<p class=\"muted\">Nothing is decided until you press a button. Your decision is recorded with your address.</p>\n</div>\n</form>")
	})
}

// renderCall renders one pending call of the confirmation page, with the
// per-call choices when the page has them and the call needs approval.
func (v confirmView) renderCall(h *approval.HTML, c callView) {
	h.Raw("\n<div class=\"call\">\n<p style=\"margin:0 0 4px\"><strong class=\"mono\">")
	h.Text(c.Tool)
	h.Raw("</strong>")
	switch {
	case c.NeedsApproval && !c.Mine:
		h.Raw(" <span class=\"tag\">other approvers decide it</span>")
	case c.NeedsApproval:
		h.Raw(" <span class=\"tag need\">needs approval</span>")
	case c.Denied != "":
		h.Raw(" <span class=\"tag\">denied by policy</span>")
	case c.Rejected != "":
		h.Raw(" <span class=\"tag\">cannot run</span>")
	default:
		h.Raw(" <span class=\"tag\">runs without approval</span>")
	}
	if c.Effect != "" {
		h.Raw(" <span class=\"muted\">")
		h.Text(c.Effect)
		h.Raw("</span>")
	}
	h.Raw("</p>\n<p class=\"muted\" style=\"margin:0 0 4px\">id: <code>")
	h.Text(c.DisplayID)
	h.Raw("</code></p>")
	if c.Rule != "" {
		h.Raw("\n<p style=\"margin:0 0 4px\">Policy rule: <code>")
		h.Text(c.Rule)
		h.Raw("</code>")
		if c.RuleNote != "" {
			h.Raw(" — ")
			h.Text(c.RuleNote)
		}
		h.Raw("</p>")
	}
	if c.Progress != "" {
		h.Raw("\n<p style=\"margin:0 0 4px\">Votes: ")
		h.Text(c.Progress)
		h.Raw("</p>")
	}
	if c.Denied != "" {
		h.Raw("\n<p style=\"margin:0 0 4px\"><strong>Denied by policy:</strong> ")
		h.Text(c.Denied)
		h.Raw(" (it never runs)</p>")
	}
	if c.Rejected != "" {
		h.Raw("\n<p style=\"margin:0 0 4px\"><strong>Cannot run:</strong> ")
		h.Text(c.Rejected)
		h.Raw(" (the agent gets this error, whatever the decision)</p>")
	}
	if c.DefinitionNote != "" {
		h.Raw("\n<p class=\"notice\" style=\"margin:0 0 4px\">")
		h.Text(c.DefinitionNote)
		h.Raw("</p>")
	}
	h.Raw("\n<div class=\"muted\">Arguments</div>\n<pre>")
	h.Text(c.Arguments)
	h.Raw("</pre>")
	if c.InputURL != "" {
		h.Raw("\n<p><a href=\"")
		h.URL(c.InputURL)
		h.Raw("\">Show the whole arguments (")
		h.Int(c.InputSize)
		h.Raw(" bytes)</a></p>")
	}
	if c.Preview != "" {
		h.Raw("\n<div class=\"muted\">Preview</div>\n<pre>")
		h.Text(c.Preview)
		h.Raw("</pre>")
	}
	if c.PreviewURL != "" {
		h.Raw("\n<p><a href=\"")
		h.URL(c.PreviewURL)
		h.Raw("\"><strong>Show the whole preview (")
		h.Int(c.PreviewSize)
		h.Raw(" bytes)</strong></a> — this summary shows only its beginning.</p>")
	}
	if v.PerCall && c.Mine {
		h.Raw("\n<fieldset class=\"choice\" style=\"border:0;padding:0;margin:8px 0 0\">\n<legend class=\"muted\">Decision for call ")
		h.Int(c.Number)
		h.Raw(" (")
		h.Text(c.Tool)
		h.Raw(")</legend>\n<label><input type=\"radio\" name=\"call.")
		h.Text(c.ID)
		h.Raw("\" value=\"approve\" required> Approve</label>\n<label><input type=\"radio\" name=\"call.")
		h.Text(c.ID)
		h.Raw("\" value=\"deny\" required> Deny</label>\n<label for=\"reason-")
		h.Int(c.Number)
		h.Raw("\">Reason if call ")
		h.Int(c.Number)
		h.Raw(" is denied (optional)</label>\n<textarea id=\"reason-")
		h.Int(c.Number)
		h.Raw("\" name=\"reason.")
		h.Text(c.ID)
		h.Raw("\" maxlength=\"")
		h.Int(v.MaxReason)
		h.Raw("\"></textarea>\n</fieldset>")
	}
	h.Raw("\n</div>")
}

// render renders the page of one part of a held call's input or preview.
func (v textView) render() string {
	return layout(v.Title, func(h *approval.HTML) {
		h.Raw("<div class=\"card\">\n<h1>")
		h.Text(v.Title)
		h.Raw("</h1>\n<dl>\n<dt>Run</dt><dd class=\"mono\">")
		h.Text(v.RunID)
		h.Raw("</dd>\n<dt>Call</dt><dd>")
		toolCall(h, v.Tool, v.CallID)
		h.Raw("</dd>\n<dt>Shown</dt><dd>bytes ")
		h.Int(v.From)
		h.Raw(" to ")
		h.Int(v.To)
		h.Raw(" of ")
		h.Int(v.Size)
		h.Raw("</dd>\n</dl>\n<pre>")
		h.Text(v.Text)
		h.Raw("</pre>")
		if v.NextURL != "" {
			h.Raw("\n<p><a href=\"")
			h.URL(v.NextURL)
			h.Raw("\"><strong>Next part</strong></a> (from byte ")
			h.Int(v.To)
			h.Raw(")</p>")
		} else {
			h.Raw("\n<p class=\"muted\">End of the ")
			h.Text(v.Part)
			h.Raw(".</p>")
		}
		h.Raw("\n<p><a href=\"?\">Back to the decision</a></p>\n</div>")
	})
}

// render renders every page but the confirmation and text pages.
func (v outcomeView) render() string {
	return layout(v.Title, func(h *approval.HTML) {
		h.Raw("<div class=\"card\">\n<h1>")
		h.Text(v.Title)
		h.Raw("</h1>")
		for _, p := range v.Paragraphs {
			h.Raw("\n<p>")
			h.Text(p)
			h.Raw("</p>")
		}
		if len(v.Calls) > 0 {
			h.Raw("\n<ul>")
			for _, c := range v.Calls {
				h.Raw("\n<li>")
				toolCall(h, c.Tool, c.ID)
				h.Raw(": ")
				h.Text(c.Outcome)
				if c.Reason != "" {
					h.Raw(" — <q>")
					h.Text(c.Reason)
					h.Raw("</q>")
				}
				h.Raw("</li>")
			}
			h.Raw("\n</ul>")
		}
		if v.RunID != "" {
			h.Raw("\n<p class=\"muted\">Run <span class=\"mono\">")
			h.Text(v.RunID)
			h.Raw("</span></p>")
		}
		h.Raw("\n<p class=\"muted\">You can close this page.</p>\n</div>")
	})
}

// toolCall writes a call's tool name and, muted, its call id.
func toolCall(h *approval.HTML, tool, id string) {
	h.Raw("<strong class=\"mono\">")
	h.Text(tool)
	h.Raw("</strong> <span class=\"muted\">(<code>")
	h.Text(id)
	h.Raw("</code>)</span>")
}
