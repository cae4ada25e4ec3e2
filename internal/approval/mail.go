package approval

import (
	"strconv"
	"strings"
)

// text renders the plain-text body of the mail.
func (v mailView) text() string {
	var b strings.Builder
	if v.Reminder {
		b.WriteString("REMINDER: this run is still waiting for your decision.\n\n")
	}
	b.WriteString("An agent run needs your approval before it can continue.\n\nRun:        ")
	b.WriteString(v.RunID)
	b.WriteString("\nStarted by: ")
	b.WriteString(v.Initiator)
	b.WriteString("\nPurpose:    ")
	b.WriteString(indent("            ", v.Purpose))
	b.WriteString("\nDecide by:  ")
	b.WriteString(v.Deadline)
	if v.Voting {
		b.WriteString("\nApprovals:  ")
		switch {
		case v.VotesNeeded <= 1:
			// No one person may decide every held call.
			b.WriteString("each call is decided by its own approvers, one approval each")
		case v.SameNeeds:
			b.WriteString(strconv.Itoa(v.VotesNeeded))
			b.WriteString(" approvals from distinct persons are needed")
		default:
			b.WriteString("each call needs its own number of approvals from distinct persons, up to ")
			b.WriteString(strconv.Itoa(v.VotesNeeded))
		}
		if v.Voted != "" {
			b.WriteString("; so far: ")
			b.WriteString(v.Voted)
		}
		if v.More != "" {
			b.WriteString("\nNeeded:     ")
			b.WriteString(v.More)
		}
		if v.StillNeeded != "" {
			b.WriteString("\nMay vote:   ")
			b.WriteString(indent("            ", v.StillNeeded))
		}
	}
	b.WriteString("\n\nTo review the calls and decide, open:\n\n  ")
	b.WriteString(v.Link)
	b.WriteString("\n\nOpening the link only shows the calls; nothing is decided until you\n" +
		"press Approve or Deny on that page. Do not forward this mail: whoever\n" +
		"holds the link can decide.\n\nPending calls: ")
	b.WriteString(strconv.Itoa(len(v.Calls)))
	b.WriteString(" (")
	b.WriteString(strconv.Itoa(v.NeedApproval))
	b.WriteString(needs(v.NeedApproval))
	b.WriteString(" approval)\n")
	for _, c := range v.Calls {
		b.WriteString("\n[")
		b.WriteString(strconv.Itoa(c.Number))
		b.WriteString("] ")
		b.WriteString(c.Tool)
		switch {
		case c.NeedsApproval && c.Others:
			b.WriteString(" (needs approval; other approvers decide it")
		case c.NeedsApproval:
			b.WriteString(" (needs approval")
		case c.Denied != "":
			b.WriteString(" (denied by policy")
		case c.Rejected != "":
			b.WriteString(" (cannot run")
		default:
			b.WriteString(" (runs without approval")
		}
		if c.Effect != "" {
			b.WriteString(", ")
			b.WriteString(c.Effect)
		}
		b.WriteString(")\n    id: ")
		b.WriteString(c.ID)
		if c.Rule != "" {
			b.WriteString("\n    policy rule: ")
			b.WriteString(c.Rule)
			if c.RuleNote != "" {
				b.WriteString(" (")
				b.WriteString(c.RuleNote)
				b.WriteString(")")
			}
		}
		if c.Denied != "" {
			b.WriteString("\n    denied by policy: ")
			b.WriteString(c.Denied)
		}
		if c.Rejected != "" {
			b.WriteString("\n    cannot run: ")
			b.WriteString(c.Rejected)
			b.WriteString(" (the agent gets this error, whatever the decision)")
		}
		if c.DefinitionNote != "" {
			b.WriteString("\n    note: ")
			b.WriteString(c.DefinitionNote)
		}
		b.WriteString("\n    arguments:\n      ")
		b.WriteString(indent("      ", c.Arguments))
		if c.Preview != "" {
			b.WriteString("\n    preview:\n      ")
			b.WriteString(indent("      ", c.Preview))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n--\nYou get this mail because ")
	b.WriteString(v.Approver)
	b.WriteString(" is an approver of run ")
	b.WriteString(v.RunID)
	b.WriteString(".\nWithout a decision the run expires at the deadline.\n")
	return b.String()
}

// needs is the verb's ending after a count: "need" or, for one, "needs".
func needs(n int) string {
	if n == 1 {
		return " needs"
	}
	return " need"
}

// Styles of the HTML mail (inline: mail clients drop style sheets).
const (
	mailLabelCell = `<tr><td style="padding:2px 12px 2px 0;color:#52525b;vertical-align:top">`
	mailPre       = `<pre style="margin:0 0 8px;padding:8px;background:#f4f4f5;border-radius:4px;font-size:13px;white-space:pre-wrap;word-break:break-word;font-family:Menlo,Consolas,monospace">`
	mailPreLast   = `<pre style="margin:0;padding:8px;background:#f4f4f5;border-radius:4px;font-size:13px;white-space:pre-wrap;word-break:break-word;font-family:Menlo,Consolas,monospace">`
	mailSubtitle  = `<p style="margin:0 0 4px;font-size:13px;color:#52525b">`
)

// html renders the HTML body of the mail: inline styles only, no scripts,
// no external images, every value escaped.
func (v mailView) html() string {
	var h HTML
	h.Raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>")
	h.Text(v.Subject)
	h.Raw("</title>\n</head>\n" +
		`<body style="margin:0;padding:0;background:#f4f4f5;color:#18181b;font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:15px;line-height:1.45">` + "\n" +
		`<div style="max-width:640px;margin:0 auto;padding:16px">` + "\n" +
		`<div style="background:#ffffff;border:1px solid #e4e4e7;border-radius:8px;padding:20px">`)
	if v.Reminder {
		h.Raw("\n" + `<p style="margin:0 0 12px;padding:8px 12px;background:#fef3c7;border-radius:6px;font-weight:bold">Reminder: this run is still waiting for your decision.</p>`)
	}
	h.Raw("\n" + `<h1 style="margin:0 0 12px;font-size:20px">An agent run needs your approval</h1>` + "\n" +
		`<table style="border-collapse:collapse;margin:0 0 16px;font-size:14px" role="presentation">` + "\n" +
		mailLabelCell + `Run</td><td style="padding:2px 0;font-family:Menlo,Consolas,monospace">`)
	h.Text(v.RunID)
	h.Raw("</td></tr>\n" + mailLabelCell + `Started by</td><td style="padding:2px 0">`)
	h.Text(v.Initiator)
	h.Raw("</td></tr>\n" + mailLabelCell + `Purpose</td><td style="padding:2px 0;white-space:pre-wrap;word-break:break-word">`)
	h.Text(v.Purpose)
	h.Raw("</td></tr>\n" + mailLabelCell + `Decide by</td><td style="padding:2px 0;font-weight:bold">`)
	h.Text(v.Deadline)
	h.Raw("</td></tr>\n</table>\n" + `<p style="margin:0 0 8px"><a href="`)
	h.URL(v.Link)
	h.Raw(`" style="display:inline-block;padding:10px 18px;background:#2563eb;color:#ffffff;text-decoration:none;border-radius:6px;font-weight:bold">Review and decide</a></p>` + "\n" +
		`<p style="margin:0 0 16px;font-size:13px;color:#52525b">Opening the link only shows the calls; nothing is decided until you press Approve or Deny on that page. Do not forward this mail: whoever holds the link can decide.</p>`)
	if v.Voting {
		h.Raw("\n" + `<p style="margin:0 0 12px;font-size:14px"><strong>`)
		switch {
		case v.VotesNeeded <= 1:
			h.Raw("Each call is decided by its own approvers</strong>, one approval each")
		case v.SameNeeds:
			h.Int(v.VotesNeeded)
			h.Raw(" approvals</strong> from distinct persons are needed")
		default:
			h.Raw("Each call needs its own number of approvals</strong> from distinct persons, up to ")
			h.Int(v.VotesNeeded)
		}
		if v.Voted != "" {
			h.Raw("; so far: ")
			h.Text(v.Voted)
		}
		if v.More != "" {
			h.Raw(". Still needed: ")
			h.Text(v.More)
		}
		if v.StillNeeded != "" {
			h.Raw(". Who may still vote: ")
			h.Text(v.StillNeeded)
		}
		h.Raw(".</p>")
	}
	h.Raw("\n" + `<h2 style="margin:0 0 8px;font-size:16px">Pending calls: `)
	h.Int(len(v.Calls))
	h.Raw(" (")
	h.Int(v.NeedApproval)
	h.Raw(needs(v.NeedApproval) + " approval)</h2>")
	for _, c := range v.Calls {
		h.Raw("\n" + `<div style="border:1px solid #e4e4e7;border-radius:6px;padding:12px;margin:0 0 12px">` + "\n" +
			`<p style="margin:0 0 6px"><strong style="font-family:Menlo,Consolas,monospace">`)
		h.Text(c.Tool)
		h.Raw("</strong>")
		switch {
		case c.NeedsApproval:
			h.Raw(` <span style="padding:1px 6px;background:#fee2e2;border-radius:4px;font-size:12px">needs approval</span>`)
			if c.Others {
				h.Raw(` <span style="padding:1px 6px;background:#e4e4e7;border-radius:4px;font-size:12px">other approvers decide it</span>`)
			}
		case c.Denied != "":
			h.Raw(` <span style="padding:1px 6px;background:#e4e4e7;border-radius:4px;font-size:12px">denied by policy</span>`)
		case c.Rejected != "":
			h.Raw(` <span style="padding:1px 6px;background:#e4e4e7;border-radius:4px;font-size:12px">cannot run</span>`)
		default:
			h.Raw(` <span style="padding:1px 6px;background:#e4e4e7;border-radius:4px;font-size:12px">runs without approval</span>`)
		}
		if c.Effect != "" {
			h.Raw(` <span style="font-size:12px;color:#52525b">`)
			h.Text(c.Effect)
			h.Raw("</span>")
		}
		h.Raw("</p>\n" + `<p style="margin:0 0 6px;font-size:12px;color:#52525b">id: `)
		h.Text(c.ID)
		h.Raw("</p>")
		if c.Rule != "" {
			h.Raw("\n" + `<p style="margin:0 0 6px;font-size:13px">Policy rule: <code>`)
			h.Text(c.Rule)
			h.Raw("</code>")
			if c.RuleNote != "" {
				h.Raw(" — ")
				h.Text(c.RuleNote)
			}
			h.Raw("</p>")
		}
		if c.Denied != "" {
			h.Raw("\n" + `<p style="margin:0 0 6px;font-size:13px">Denied by policy: `)
			h.Text(c.Denied)
			h.Raw("</p>")
		}
		if c.Rejected != "" {
			h.Raw("\n" + `<p style="margin:0 0 6px;font-size:13px">Cannot run: `)
			h.Text(c.Rejected)
			h.Raw(" (the agent gets this error, whatever the decision)</p>")
		}
		if c.DefinitionNote != "" {
			h.Raw("\n" + `<p style="margin:0 0 6px;padding:6px 8px;background:#fef3c7;border-radius:4px;font-size:13px">`)
			h.Text(c.DefinitionNote)
			h.Raw("</p>")
		}
		h.Raw("\n" + mailSubtitle + "Arguments</p>\n" + mailPre)
		h.Text(c.Arguments)
		h.Raw("</pre>")
		if c.Preview != "" {
			h.Raw("\n" + mailSubtitle + "Preview</p>\n" + mailPreLast)
			h.Text(c.Preview)
			h.Raw("</pre>")
		}
		h.Raw("\n</div>")
	}
	h.Raw("\n" + `<p style="margin:16px 0 0;font-size:12px;color:#71717a">If the button does not work, copy this address into your browser:<br><span style="word-break:break-all">`)
	h.Text(v.Link)
	h.Raw("</span></p>\n</div>\n" + `<p style="margin:12px 0 0;font-size:12px;color:#71717a">You get this mail because `)
	h.Text(v.Approver)
	h.Raw(" is an approver of run ")
	h.Text(v.RunID)
	h.Raw(". Without a decision the run expires at the deadline.</p>\n</div>\n</body>\n</html>\n")
	return h.String()
}
