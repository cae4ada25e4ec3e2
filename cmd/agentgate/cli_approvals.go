package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

func init() {
	commands["approvals"] = command{
		summary: "the approver's side: list what waits for you, show a held turn with its diffs, approve or deny it",
		run: func(ctx context.Context, args []string, stdout io.Writer) error {
			return runGroup(ctx, "approvals", approvalsVerbs(), args, stdout)
		},
	}
}

// inboxVotes is what an inbox line says of a quorum ("" when one approval
// decides): the most approvals a held call still needs (votes_missing; the
// entry does not say each call's, `approvals show` does), the most a call
// needs, and how many persons approved a call so far.
func inboxVotes(a client.PendingApproval) string {
	switch {
	case a.VotesNeeded <= 1:
		return ""
	case a.VotesMissing == 0: // a server before votes_missing
		return fmt.Sprintf("  needs up to %d approvals per call", a.VotesNeeded)
	}
	s := fmt.Sprintf("  up to %d more approval(s) per call (each needs up to %d)", a.VotesMissing, a.VotesNeeded)
	if a.Approvals != nil && *a.Approvals > 0 {
		s += fmt.Sprintf("; %d person(s) approved a call so far", *a.Approvals)
	}
	return s
}

func approvalsVerbs() map[string]subcommand {
	var (
		digest, message string
		limit           int
	)
	digestFlag := func(fs *flag.FlagSet) {
		fs.StringVar(&digest, "digest", "", "the `digest` you reviewed (printed by approvals show); without it, the turn is shown and you are asked (on a terminal)")
	}
	return map[string]subcommand{
		"list": {
			usage: "[--limit N]", summary: "the runs waiting for your decision, newest first",
			flags: func(fs *flag.FlagSet) { fs.IntVar(&limit, "limit", 0, "print at most this many (0: all)") },
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				if len(args) > 0 {
					return usagef("unexpected arguments %q", args)
				}
				if limit < 0 {
					return usagef("--limit %d: give 0 (all) or more", limit)
				}
				c, err := g.client()
				if err != nil {
					return err
				}
				list := []client.PendingApproval{}
				for a, err := range c.PendingApprovals(ctx) {
					if err != nil {
						return err
					}
					list = append(list, a)
					if limit > 0 && len(list) == limit {
						break
					}
				}
				return output(g, w, list, func() {
					if len(list) == 0 {
						fmt.Fprintln(w, "nothing waits for your decision")
					}
					for _, a := range list {
						fmt.Fprintf(w, "%s  from %s  %s  due %s%s\n    %s\n", one(a.RunID), one(a.Initiator), one(strings.Join(a.Tools, ",")), until(a.Deadline), inboxVotes(a), one(a.Purpose))
					}
				})
			},
		},
		"show": {
			usage: "ID", summary: "print each pending call with its arguments and diff, and the digest to decide on",
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				id, c, err := g.runClient(args)
				if err != nil {
					return err
				}
				r, err := waitingRun(ctx, c, id)
				if err != nil {
					return err
				}
				return output(g, w, r, func() {
					writeHeldTurn(w, r, useColour(w))
					fmt.Fprintf(w, "\ndecide on exactly these calls:\n  agentgate approvals approve %s --digest %s\n  agentgate approvals deny %s --digest %s --message \"why\"\n",
						r.ID, r.Pending.TurnDigest, r.ID, r.Pending.TurnDigest)
				})
			},
		},
		"approve": {
			usage: "ID [--digest D]", summary: "approve the whole held turn you reviewed",
			flags: digestFlag,
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				return decideTurn(ctx, g, args, w, digest, client.Approve, "")
			},
		},
		"deny": {
			usage: "ID [--digest D] [--message WHY]", summary: "deny the whole held turn you reviewed",
			flags: func(fs *flag.FlagSet) {
				digestFlag(fs)
				fs.StringVar(&message, "message", "", "the reason (shown to the model)")
			},
			run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
				return decideTurn(ctx, g, args, w, digest, client.Deny, message)
			},
		},
	}
}

// waitingRun loads a run that waits for approval.
func waitingRun(ctx context.Context, c *client.Client, id string) (*client.Run, error) {
	r, err := c.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Status != client.StatusWaiting || r.Pending == nil {
		last := ""
		if d := r.Decision; d != nil {
			// As the API's 409 says it: a decider whose answer was lost
			// learns whether theirs was recorded.
			who := "by " + d.By
			if len(d.Deciders) > 0 {
				who = "by votes, the last cast by " + d.By
			}
			last = fmt.Sprintf(" (its last turn was decided %s via %s at %s)", who, d.Via, d.At.UTC().Format(runs.InstantLayout))
		}
		return nil, fmt.Errorf("run %s is %s: nothing waits for a decision%s", id, r.Status, last)
	}
	// The run shows long inputs and previews shortened: an approver sees
	// every byte of them before deciding.
	for i, call := range r.Pending.Calls {
		if call.PreviewTruncated {
			text, err := c.HeldCallText(ctx, id, call.ID, "preview")
			if err != nil {
				return nil, fmt.Errorf("the whole preview of call %s: %w", call.ID, err)
			}
			r.Pending.Calls[i].Preview, r.Pending.Calls[i].PreviewTruncated = text, false
		}
		if call.InputTruncated {
			text, err := c.HeldCallText(ctx, id, call.ID, "input")
			if err != nil {
				return nil, fmt.Errorf("the whole input of call %s: %w", call.ID, err)
			}
			r.Pending.Calls[i].Input, r.Pending.Calls[i].InputTruncated = json.RawMessage(text), false
		}
	}
	return r, nil
}

// decideTurn approves or denies the whole held turn. The decision binds to
// the digest the approver saw: given with --digest (printed by `approvals
// show`), or, on a terminal, the one of the turn shown right here before
// asking for confirmation.
func decideTurn(ctx context.Context, g *globalFlags, args []string, w io.Writer, digest string, action client.Action, message string) error {
	id, c, err := g.runClient(args)
	if err != nil {
		return err
	}
	if digest == "" {
		if !cliIsTerminal(cliStdin) || g.json {
			return usagef("give --digest: the turn digest you reviewed (`agentgate approvals show %s` prints it)", id)
		}
		r, err := waitingRun(ctx, c, id)
		if err != nil {
			return err
		}
		writeHeldTurn(w, r, useColour(w))
		held := 0 // the calls the decision is on; read-only siblings run anyway
		for _, c := range r.Pending.Calls {
			if c.NeedsApproval {
				held++
			}
		}
		fmt.Fprintf(w, "\n%s the %d call(s) that need approval in run %s? [y/N] ", strings.ToUpper(string(action[:1]))+string(action[1:]), held, id)
		answer, _ := bufio.NewReader(cliStdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return errors.New("nothing decided")
		}
		digest = r.Pending.TurnDigest
	}
	d := client.Decision{TurnDigest: digest, Action: action, Message: message}
	r, err := c.Decide(ctx, id, d)
	if err != nil {
		return explainDecideError(id, err)
	}
	return output(g, w, r, func() {
		fmt.Fprintf(w, "%s recorded for run %s (turn %s); the run is %s\n", decisionWord(action), r.ID, short(digest), r.Status)
	})
}

func decisionWord(a client.Action) string {
	if a == client.Approve {
		return "approval"
	}
	return "denial"
}

// voterName names the voter of v as the server names deciders: by person
// (Vote.Person), or as they authenticated from a server before persons.
func voterName(v client.Vote) string {
	if v.Person != "" {
		return v.Person
	}
	return v.By
}

// quorum reports whether a held call of calls needs approvals from more
// than one person: votes then take no edits (where each call needs one,
// the voter who decides a call may edit it).
func quorum(calls []client.PendingCall) bool {
	for _, c := range calls {
		if c.NeedsApproval && c.Approval != nil && c.Approval.RequiredApprovals > 1 {
			return true
		}
	}
	return false
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// writeHeldTurn prints the held turn of a waiting run: every call with its
// arguments and, for writes, the diff.
func writeHeldTurn(w io.Writer, r *client.Run, colour bool) {
	p := r.Pending
	bold := func(s string) {
		if colour {
			paint(w, ansiBold)
		}
		fmt.Fprint(w, s)
		if colour {
			paint(w, ansiReset)
		}
	}
	bold("run " + one(r.ID))
	fmt.Fprintf(w, " started by %s\n", one(r.Initiator))
	if len(r.Metadata) > 0 {
		b, _ := json.Marshal(r.Metadata)
		fmt.Fprintf(w, "metadata %s\n", b)
	}
	fmt.Fprintf(w, "turn digest %s\ndeadline    %s\n", p.TurnDigest, until(p.Deadline))
	if line := voteLine(r); line != "" {
		fmt.Fprintf(w, "votes       %s\n", line)
	}
	for i, call := range p.Calls {
		need := "runs on resume without approval"
		switch {
		case call.NeedsApproval && votedOut(call.Approval) != "":
			need = strings.ToUpper(votedOut(call.Approval)) + " by the votes"
		case call.NeedsApproval:
			need = "NEEDS APPROVAL"
		case call.Denied != "":
			need = "DENIED BY POLICY, never runs"
		case call.Rejected != "":
			need = "CANNOT RUN, fails whatever the decision"
		}
		fmt.Fprint(w, "\n")
		bold(fmt.Sprintf("[%d] %s", i+1, one(call.Tool)))
		fmt.Fprintf(w, " %s  (%s, id %s)\n", need, orDash(string(call.Effect)), one(call.ID))
		if call.Rule != "" {
			fmt.Fprintf(w, "    rule: %s\n", one(call.Rule))
		}
		if a := call.Approval; a != nil {
			if a.Description != "" {
				fmt.Fprintf(w, "    why:  %s\n", one(a.Description))
			}
			if len(a.Approvers) > 0 {
				fmt.Fprintf(w, "    approvers: %s\n", one(strings.Join(a.Approvers, ", ")))
			}
			if a.RequiredApprovals > 1 || a.FourEyes || a.AlwaysAsk {
				fmt.Fprintf(w, "    needs: %d approval(s)%s%s\n", max(a.RequiredApprovals, 1),
					map[bool]string{true: ", four-eyes"}[a.FourEyes], map[bool]string{true: ", always ask"}[a.AlwaysAsk])
			}
			if progress := callProgress(a); progress != "" {
				fmt.Fprintf(w, "    votes: %s\n", progress)
			}
		} else if call.RuleDescription != "" {
			fmt.Fprintf(w, "    why:  %s\n", one(call.RuleDescription))
		}
		if call.Denied != "" {
			fmt.Fprintf(w, "    DENIED by policy: %s\n", one(call.Denied))
		}
		switch {
		case call.Rejected != "" && call.NeedsApproval:
			if r.Voting && quorum(p.Calls) {
				fmt.Fprintf(w, "    fails as it is: %s (votes under a quorum take no edits)\n", one(call.Rejected))
			} else {
				fmt.Fprintf(w, "    fails as it is: %s (an edit with a valid input runs instead)\n", one(call.Rejected))
			}
		case call.Rejected != "":
			fmt.Fprintf(w, "    cannot run: %s\n", one(call.Rejected))
		}
		if call.ApprovedBy != "" {
			fmt.Fprintf(w, "    approved for this run by %s\n", one(call.ApprovedBy))
		}
		if note := definitionNote(call); note != "" {
			fmt.Fprintf(w, "    NOTE: %s\n", note)
		}
		if len(call.Input) > 0 {
			// As the page and the mail show it: the literal text, not an
			// encoder's \u003c; CleanText makes control characters visible.
			pretty := approval.CleanText(approval.PrettyArguments(call.Input))
			fmt.Fprintf(w, "    input: %s\n", strings.ReplaceAll(pretty, "\n", "\n    "))
		}
		if call.Preview != "" {
			fmt.Fprintln(w, "    preview:")
			writeDiff(w, call.Preview, "      ", colour)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// definitionNote is the note the page and the mail show when the call's
// tool could not be checked against its server as the turn was held, on
// one line with control characters made visible; "" when it was checked.
func definitionNote(call client.PendingCall) string {
	u := call.DefinitionUnverified
	if u == nil {
		return ""
	}
	return one(approval.CleanText(approval.DefinitionNote(&loop.UnverifiedDefinition{Reason: u.Reason, ListedAt: u.ListedAt})))
}

// voteLine says, for a run waiting on votes (a quorum, or calls no one
// person may decide together: Run.Voting), who voted how and what is
// still needed: "2 more approval(s)", or each open call's own where they
// differ (approval.MoreApprovals); "" when one decision decides.
func voteLine(r *client.Run) string {
	// A server before Run.Voting says a quorum by votes_needed alone.
	if !r.Voting && len(r.Votes) == 0 && (r.VotesNeeded == nil || *r.VotesNeeded <= 1) {
		return ""
	}
	var votes []string
	for _, v := range r.Votes {
		how := string(v.Action)
		if how == "" {
			var each []string
			for _, ch := range v.Calls {
				each = append(each, one(ch.CallID)+"="+string(ch.Action))
			}
			how = "per call: " + strings.Join(each, " ")
		}
		votes = append(votes, fmt.Sprintf("%s %s (%s)", one(voterName(v)), how, v.Via))
	}
	missing := 0
	if r.VotesNeeded != nil {
		missing = *r.VotesNeeded
	}
	more := approval.MoreApprovals(callsProgress(r))
	if more == "" {
		more = fmt.Sprintf("%d more approval(s)", missing)
	}
	cast := "none yet" // "-" read as a minus or a missing value
	if len(votes) > 0 {
		cast = strings.Join(votes, ", ")
	}
	return fmt.Sprintf("%s; %s needed", cast, one(more))
}

// callsProgress is the vote progress of r's held calls as the server
// shows it in each call's approval (none from a server before per-call
// progress).
func callsProgress(r *client.Run) []approval.CallProgress {
	if r.Pending == nil {
		return nil
	}
	var out []approval.CallProgress
	for _, c := range r.Pending.Calls {
		a := c.Approval
		if !c.NeedsApproval || a == nil || a.Approvals == nil || a.StillNeeded == nil {
			continue
		}
		out = append(out, approval.CallProgress{ID: c.ID, Tool: c.Tool, Needed: *a.Approvals + *a.StillNeeded,
			Approvals: *a.Approvals, StillNeeded: *a.StillNeeded, DeniedBy: a.DeniedBy})
	}
	return out
}

// votedOut says how the votes decided a held call ("approved", "denied"),
// "" while it is open or when one decision decides the turn (no progress).
func votedOut(a *client.ApprovalRule) string {
	switch {
	case a == nil:
		return ""
	case a.DeniedBy != "":
		return "denied"
	case a.StillNeeded != nil && *a.StillNeeded == 0 && a.Approvals != nil && *a.Approvals > 0:
		return "approved"
	}
	return ""
}

// callProgress is a held call's own vote progress when votes decide ("" when
// the run shows none).
func callProgress(a *client.ApprovalRule) string {
	switch {
	case a == nil:
		return ""
	case a.DeniedBy != "":
		return "denied by " + one(a.DeniedBy)
	case votedOut(a) == "approved" && len(a.ApprovedBy) > 0:
		return "approved by " + one(strings.Join(a.ApprovedBy, ", "))
	case a.Approvals != nil && a.StillNeeded != nil && len(a.ApprovedBy) > 0:
		return fmt.Sprintf("%d approval(s) (%s), %d more needed", *a.Approvals, one(strings.Join(a.ApprovedBy, ", ")), *a.StillNeeded)
	case a.Approvals != nil && a.StillNeeded != nil:
		return fmt.Sprintf("%d approval(s), %d more needed", *a.Approvals, *a.StillNeeded)
	}
	return ""
}
