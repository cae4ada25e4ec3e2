package runs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
)

// Inbox page sizes.
const (
	DefaultInboxLimit = 50
	MaxInboxLimit     = 100
)

// maxInboxReads bounds how many adapter pages one Store.Inbox call reads
// while it skips entries whose deadline has passed.
const maxInboxReads = 4

// InboxEntry is one entry of an approver's inbox: a suspension that waits
// for that approver's decision. Suspend stores one entry per approver key
// in the same write as the suspension, and the write that moves the run on
// (decide, cancel, expire, a new suspension) deletes them, so the inbox is
// exactly the waiting suspensions. It carries what a listing shows, so
// reading an inbox reads no run rows.
type InboxEntry struct {
	// Approver is the approver key the entry is indexed under (ApproverKey).
	Approver     string `json:"approver"`
	RunID        string `json:"run_id"`
	SuspensionID string `json:"suspension_id"`
	TurnDigest   string `json:"turn_digest"`
	Initiator    string `json:"initiator"`
	// Purpose is a short summary of what the run is for (Run.Purpose).
	Purpose string `json:"purpose"`
	// Tools are the tools of the calls that need approval, in turn order,
	// each once.
	Tools       []string  `json:"tools"`
	Deadline    time.Time `json:"deadline"`
	SuspendedAt time.Time `json:"suspended_at"`
	// VotesNeeded is how many approvals the suspension needs: the most
	// approvals from distinct persons any of its held calls needs
	// (Run.VotesNeeded; each call counts its own).
	VotesNeeded int `json:"votes_needed"`
	// Counted is VotesNeeded less the approvals the suspension still
	// missed when the entry was written (Run.VotesMissing: the most any
	// held call not yet decided still needs), so that VotesMissing is
	// VotesNeeded less Counted. It is not a count of persons (that is
	// ApprovingPersons): stored as "approvals", with the meaning every
	// release that reads entries gives it. A vote that leaves the run
	// waiting rewrites the entries that remain (Store.Decide); an entry
	// written before entries counted says 0 until the next such vote.
	Counted int `json:"approvals,omitempty"`
	// ApprovingPersons is how many distinct persons had approved at least
	// one held call when the entry was written (Run.Approvals); nil for an
	// entry written before entries counted them, until the next vote
	// rewrites it.
	ApprovingPersons *int `json:"approving_persons,omitempty"`
}

// VotesMissing returns how many approvals the suspension still needs
// before the run resumes, as of the entry (Run.VotesMissing is the row's:
// the most any held call not yet approved or denied still needs).
func (e InboxEntry) VotesMissing() int {
	return max(max(e.VotesNeeded, 1)-e.Counted, 0)
}

// InboxKey names one inbox entry. An approver's inbox is ordered by
// SuspendedAt, newest first, then by RunID.
type InboxKey struct {
	Approver    string
	RunID       string
	SuspendedAt time.Time
}

// Key returns the entry's key.
func (e InboxEntry) Key() InboxKey {
	return InboxKey{Approver: e.Approver, RunID: e.RunID, SuspendedAt: e.SuspendedAt}
}

// ApproverKey returns the key an approver entry's inbox is indexed under:
// the canonical identity key of a principal (identity.Principal.Key, so an
// assumed-role session finds what waits for its role, and an e-mail
// address matches whatever its case or +tag), "group:<name>" for a group
// entry, and "" for an entry that names no principal. Groups are not
// expanded into their members here: a group's entries are indexed under
// the group, for a caller whose groups the directory knows.
func ApproverKey(entry string) string {
	if name, ok := strings.CutPrefix(entry, identity.GroupPrefix); ok {
		if name == "" {
			return ""
		}
		return identity.GroupPrefix + name
	}
	p, err := identity.Parse(entry)
	if err != nil {
		return ""
	}
	return p.Key()
}

// CallerKey returns the approver key whose inbox an authenticated caller
// reads: the canonical identity key of the principal, or "" when who names
// no principal. A group entry is never a caller, so a principal that
// happens to be called "group:x" cannot read a group's entries.
func CallerKey(who string) string {
	p, err := identity.Parse(who)
	if err != nil {
		return ""
	}
	return p.Key()
}

// SubjectKey returns the inbox key of an authenticated caller with a
// directory: the person's key ("person:<id>") for any alias of a directory
// person, else the principal's canonical key (CallerKey); "" when who
// names no principal. Suspensions index their eligible deciders this way
// (Suspension.InboxKeys), so a caller finds what waits for them through any
// alias and any group.
func SubjectKey(dir *identity.Directory, who string) string {
	p, err := identity.Parse(who)
	if err != nil {
		return ""
	}
	return dir.Lookup(p).Key()
}

// inboxKeys returns the keys a suspension sp of cur is listed under: each
// distinct key of sp.InboxKeys, or else each distinct approver key of
// sp.InboxApprovers (nil: the run's approvers); nil when there is none.
func inboxKeys(cur *Run, sp Suspension) []string {
	approvers := sp.InboxApprovers
	if approvers == nil {
		approvers = cur.Approvers
	}
	keyOf := ApproverKey
	if sp.InboxKeys != nil {
		approvers, keyOf = sp.InboxKeys, func(k string) string { return k }
	}
	var out []string
	for _, a := range approvers {
		if k := keyOf(a); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// inboxEntries returns the inbox entries of the waiting run r, one per key
// of r.InboxKeys, from the row alone: a suspension writes them and a vote
// that leaves the run waiting writes them again, with its approvals.
func inboxEntries(r *Run) []InboxEntry {
	var tools []string
	for _, c := range r.PendingCalls {
		if c.NeedsApproval && !slices.Contains(tools, c.Tool) {
			tools = append(tools, c.Tool)
		}
	}
	if tools == nil {
		tools = []string{}
	}
	out := make([]InboxEntry, 0, len(r.InboxKeys))
	persons := r.Approvals()
	for _, k := range r.InboxKeys {
		persons := persons // each entry its own
		out = append(out, InboxEntry{
			Approver: k, RunID: r.ID, SuspensionID: r.SuspensionID, TurnDigest: r.TurnDigest,
			Initiator: r.Initiator, Purpose: r.Purpose, Tools: slices.Clone(tools),
			Deadline: r.ApprovalDeadline, SuspendedAt: r.SuspendedAt, VotesNeeded: max(r.VotesNeeded, 1),
			Counted: max(r.VotesNeeded, 1) - r.VotesMissing(), ApprovingPersons: &persons,
		})
	}
	return out
}

// leaveInbox adds to w the deletion of cur's inbox entries when next leaves
// cur's suspension, and clears them (and those a quorum check dropped:
// Run.InboxDropped) on next. Every transition goes through
// it (Store.write), so no transition out of WAITING_FOR_APPROVAL can leave
// an entry behind.
func leaveInbox(cur, next *Run, w *Write) {
	if cur.Status != StatusWaiting || len(cur.InboxKeys)+len(cur.InboxDropped) == 0 {
		return
	}
	if next.Status == StatusWaiting && next.SuspensionID == cur.SuspensionID {
		return
	}
	for _, k := range cur.InboxKeys {
		// A final vote already drops its voter's entry: each key once
		// (DynamoDB refuses two operations on one item in a transaction).
		if !slices.ContainsFunc(w.DropInbox, func(d InboxKey) bool { return d.Approver == k && d.RunID == cur.ID }) {
			w.DropInbox = append(w.DropInbox, InboxKey{Approver: k, RunID: cur.ID, SuspendedAt: cur.SuspendedAt})
		}
	}
	next.InboxKeys, next.InboxDropped = nil, nil
}

// Inbox returns up to limit (1 to MaxInboxLimit; 0: DefaultInboxLimit)
// entries waiting for the approver with the given key (ApproverKey), newest
// suspension first, and a cursor for the next page ("" at the end).
// Entries whose deadline has passed are left out (the sweep is about to
// expire their runs), so a page may hold fewer than limit entries and still
// have a next one. Its cost grows with the approver's entries, never with
// the number of runs. Codes: EInvalid (limit or cursor).
func (s *Store) Inbox(ctx context.Context, approver string, limit int, cursor string) ([]InboxEntry, string, error) {
	if limit == 0 {
		limit = DefaultInboxLimit
	}
	if limit < 1 || limit > MaxInboxLimit {
		return nil, "", Errorf(EInvalid, "limit must be from 1 to %d", MaxInboxLimit)
	}
	out := []InboxEntry{}
	if approver == "" {
		return out, "", nil
	}
	now := s.now()
	for range maxInboxReads {
		page, next, err := s.rows.Inbox(ctx, approver, limit-len(out), cursor)
		if err != nil {
			if ErrorCode(err) == EInvalid {
				return nil, "", err
			}
			return nil, "", fmt.Errorf("inbox: %w", err)
		}
		for _, e := range page {
			if now.Before(e.Deadline) {
				out = append(out, e)
			}
		}
		cursor = next
		if cursor == "" || len(out) == limit {
			break
		}
	}
	return out, cursor, nil
}
