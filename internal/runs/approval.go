package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
)

// TokenGrant is one approval token issued with a suspension; only the
// SHA-256 of the raw token is given.
type TokenGrant struct {
	Hash     string
	Approver string
	// Person is who the approver was when the link was issued (the
	// subject key: person:<id>, or the principal's own): the link decides
	// only while its address is still theirs (ApprovalToken.Person).
	Person string
}

// Suspension is what Suspend records about a held turn: the loop's state and
// the approval window with its link tokens.
type Suspension struct {
	// State is the loop's suspended state. Its suspension id (which must
	// differ from the run's previous one), turn digest, pending calls and
	// counters go on the row; the whole state goes into a blob.
	State *loop.SuspendedState
	// Deadline is when the approval window closes (must be in the future).
	Deadline time.Time
	// RemindAt, when set and before Deadline, is when approvers get a reminder.
	RemindAt time.Time
	// QuorumCheckAt, when set and before Deadline, is when the sweep first
	// checks that the held calls can still get their approvals
	// (Run.QuorumCheckAt); later is ignored.
	QuorumCheckAt time.Time
	// Tokens are the approval-link tokens issued to approvers.
	Tokens []TokenGrant
	// InboxApprovers are the approver entries whose inbox lists the
	// suspension, one entry per distinct ApproverKey; nil: the run's
	// approvers. The caller leaves out who may not decide (the initiator
	// under four-eyes).
	InboxApprovers []string
	// InboxKeys, when set, replace InboxApprovers: the keys (SubjectKey)
	// of everyone who may decide, groups expanded to their persons.
	InboxKeys []string
	// VotesNeeded is how many approvals the suspension needs (0: one).
	VotesNeeded int
	// PerCallVotes says votes decide the held turn, call by call
	// (HoldsVotes; Run.PerCallVotes): under a quorum, and when no one
	// person may decide every held call.
	PerCallVotes bool
	// Notify says approvers are told (mailed their links) once the
	// suspension is stored: its write keeps the number after its events
	// for the notified event of that first notification (Run.NoticeSeq),
	// which RecordNotification gives it whenever it is recorded, even
	// after the run has moved on from the suspension.
	Notify bool
}

// Suspend moves owner's RUNNING run to WAITING_FOR_APPROVAL: the state blob is
// put first (so a row never points at a missing blob), then one atomic write
// stores the row, the suspended event, the approval tokens and the
// approvers' inbox entries. Codes: EInvalid, ETooLarge (the state is over
// MaxStateSize compressed; the message names the largest calls and their
// sizes), ENotFound, EConflict.
func (s *Store) Suspend(ctx context.Context, cur *Run, owner string, sp Suspension) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	now := s.now()
	calls, blob, err := s.checkSuspension(cur, sp, now)
	if err != nil {
		return nil, err
	}
	if cur.PendingEffect != "" {
		return nil, Errorf(EConflict, "run %s has pending effect %q; record its result before suspending", cur.ID, cur.PendingEffect)
	}
	ref, err := s.states.PutState(ctx, cur.ID, blob)
	if ErrorCode(err) == ETooLarge {
		return nil, Errorf(ETooLarge, "%s; %s", ErrorMessage(err), largestParts(sp.State))
	}
	if err != nil {
		return nil, fmt.Errorf("suspend run %s: put state: %w", cur.ID, err)
	}
	st := sp.State
	deadline := ms(sp.Deadline)
	next := cur.Clone()
	next.Status = StatusWaiting
	next.SuspensionID = st.SuspensionID
	next.TurnDigest = st.TurnDigest
	next.PendingCalls = calls
	next.RuleApprovers = RuleApprovers(cur.RuleApprovers, calls)
	next.State = ref
	next.Checkpoint = StateRef{} // the suspended state is where the run goes on
	next.LeaseOwner, next.LeaseUntil = "", time.Time{}
	next.ApprovalDeadline = deadline
	next.RemindAt = ms(sp.RemindAt)
	next.ReminderSent = false
	next.QuorumCheckAt, next.QuorumLost = time.Time{}, nil
	next.MailRetry, next.MailRetryAt, next.MailRetryReminders = nil, time.Time{}, nil
	if at := ms(sp.QuorumCheckAt); at.Before(deadline) {
		next.QuorumCheckAt = at
	}
	next.Notification = NotificationPending
	next.NoticeSeq = 0 // the write keeps one when sp.Notify
	next.Decision, next.DecidedBy, next.DecidedVia, next.DecidedAt = nil, "", "", time.Time{}
	next.VotesNeeded, next.PerCallVotes, next.Votes = max(sp.VotesNeeded, 1), sp.PerCallVotes, nil
	next.Counters = st.Counters
	next.SuspendedAt = now
	next.Reclaims = 0 // the run got somewhere
	next.InboxKeys, next.InboxDropped = inboxKeys(cur, sp), nil
	w := Write{NewInbox: inboxEntries(next), keepNotice: sp.Notify}
	for _, g := range sp.Tokens {
		w.NewTokens = append(w.NewTokens, ApprovalToken{Hash: g.Hash, RunID: cur.ID, SuspensionID: st.SuspensionID, Approver: g.Approver, Person: g.Person, ExpiresAt: deadline})
	}
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	w.Events = []Event{{Type: EventSuspended, Actor: owner, Data: mustJSON(struct {
		SuspensionID string    `json:"suspension_id"`
		TurnDigest   string    `json:"turn_digest"`
		Calls        []string  `json:"calls"`
		Deadline     time.Time `json:"deadline"`
		StateSHA256  string    `json:"state_sha256"`
		StateSize    int64     `json:"state_size"`
	}{st.SuspensionID, st.TurnDigest, ids, deadline, ref.SHA256, ref.Size})}}
	// A failed write leaves an orphan blob under the run's prefix; purge
	// deletes the prefix with the run.
	return s.commit(ctx, cur, next, w)
}

// checkSuspension validates a suspension and returns the row's summary of
// its calls and the encoded state.
func (s *Store) checkSuspension(cur *Run, sp Suspension, now time.Time) ([]CallSummary, []byte, error) {
	st := sp.State
	if st == nil {
		return nil, nil, Errorf(EInvalid, "suspended state is required")
	}
	switch {
	case st.RunID != cur.ID:
		return nil, nil, Errorf(EInvalid, "suspended state is of run %q, not %s", st.RunID, cur.ID)
	case st.SuspensionID == "":
		return nil, nil, Errorf(EInvalid, "suspension id is required")
	case st.SuspensionID == cur.SuspensionID:
		return nil, nil, Errorf(EInvalid, "suspension id %q was already used by this run", st.SuspensionID)
	case st.TurnDigest == "":
		return nil, nil, Errorf(EInvalid, "turn digest is required")
	case st.HandOver != nil:
		return nil, nil, Errorf(EInvalid, "a state that hands client calls over is recorded by HandOver, not Suspend")
	case len(st.PendingCalls) == 0:
		return nil, nil, Errorf(EInvalid, "a suspension needs at least one pending call")
	case len(st.PendingCalls) > MaxPendingCalls:
		return nil, nil, Errorf(EInvalid, "%d pending calls, at most %d allowed", len(st.PendingCalls), MaxPendingCalls)
	case !sp.Deadline.After(now):
		return nil, nil, Errorf(EInvalid, "approval deadline %s is not in the future", sp.Deadline.UTC().Format(time.RFC3339))
	case !sp.RemindAt.IsZero() && !sp.RemindAt.Before(sp.Deadline):
		return nil, nil, Errorf(EInvalid, "reminder must come before the approval deadline")
	}
	calls := SummarizeCalls(st)
	seen := map[string]bool{}
	for _, c := range calls {
		if c.ID == "" || c.Tool == "" {
			return nil, nil, Errorf(EInvalid, "pending calls need an id and a tool")
		}
		if seen[c.ID] {
			return nil, nil, Errorf(EInvalid, "pending call id %q appears twice", c.ID)
		}
		seen[c.ID] = true
	}
	for _, c := range st.PendingCalls {
		if len(c.Input) > 0 && !json.Valid(c.Input) {
			return nil, nil, Errorf(EInvalid, "pending call %s: input is not valid JSON", c.ID)
		}
	}
	if b, _ := json.Marshal(calls); len(b) > MaxPendingCallsSize {
		// Only ids far longer than loop.MaxCallIDBytes get here.
		return nil, nil, Errorf(EInvalid, "the summary of the pending calls is %d bytes as JSON, over the %d-byte limit", len(b), MaxPendingCallsSize)
	}
	blob, err := st.Encode()
	if err != nil {
		return nil, nil, Errorf(EInvalid, "suspended state cannot be encoded: %v", err)
	}
	if len(sp.InboxApprovers) > MaxApprovers || len(sp.InboxKeys) > MaxApprovers {
		return nil, nil, Errorf(EInvalid, "%d inbox approvers, at most %d allowed", max(len(sp.InboxApprovers), len(sp.InboxKeys)), MaxApprovers)
	}
	for _, k := range sp.InboxKeys {
		if k == "" || len(k) > identity.MaxPrincipalLen+16 {
			return nil, nil, Errorf(EInvalid, "inbox keys must be 1 to %d bytes", identity.MaxPrincipalLen+16)
		}
	}
	if sp.VotesNeeded < 0 || sp.VotesNeeded > MaxApprovers {
		return nil, nil, Errorf(EInvalid, "votes needed must be from 0 to %d", MaxApprovers)
	}
	if err := checkGrants(sp.Tokens); err != nil {
		return nil, nil, err
	}
	return calls, blob, nil
}

// checkGrants validates the approval tokens a suspension or a
// renotification stores: at most MaxApprovers, each a lowercase hex SHA-256
// with an approver, none twice. A hash already stored is refused by the
// adapter's write (RowStore.Write: NewTokens must not exist yet), which
// changes nothing: the row no longer lists the run's tokens to check here.
func checkGrants(grants []TokenGrant) error {
	if len(grants) > MaxApprovers {
		return Errorf(EInvalid, "%d approval tokens, at most %d allowed", len(grants), MaxApprovers)
	}
	hashes := map[string]bool{}
	for _, g := range grants {
		if !ValidTokenHash(g.Hash) {
			return Errorf(EInvalid, "approval token hash must be a lowercase hex sha-256")
		}
		if g.Approver == "" {
			return Errorf(EInvalid, "approval token needs an approver")
		}
		if hashes[g.Hash] {
			return Errorf(EInvalid, "approval token hash appears twice")
		}
		hashes[g.Hash] = true
	}
	return nil
}

// NewDecision is what Decide needs: a human's answer to one suspension,
// who gave it and how it arrived.
type NewDecision struct {
	// SuspensionID is the suspension decided on.
	SuspensionID string
	// Decider is the authenticated caller or, through a link, the token's
	// approver (filled in when empty).
	Decider string
	// Via is ViaAPI or ViaLink.
	Via string
	// Token is the looked-up approval token when Via is ViaLink; it is
	// consumed (single use) in the same write.
	Token *ApprovalToken
	// Decision is the answer the loop's Resume applies. When votes decide
	// the suspension (Run.Voting) it is a vote (a turn action, approve or
	// deny, or per-call approvals and denials, and where each held call
	// needs one approval edits: Run.VotesTakeEdits), and the decision
	// stored once every held call is decided is the one the votes come to.
	Decision loop.Decision
	// Voter is who the decision counts for when votes decide the
	// suspension (identity.Subject.Key of the decider); a person votes
	// once, whatever their key was when they voted (Run.VoteOf under
	// Directory). A decision with a Voter or Choices is a vote, and is refused
	// (EConflict) by a suspension one decision decides; one with neither
	// is refused (EConflict) by a suspension votes decide (a quorum check
	// switched it since the caller read it: Store.ReviseDeciders).
	Voter string
	// Directory is the directory in force (nil: none), by which an earlier
	// vote cast under another directory is matched to this voter
	// (Run.VoteOf), and votes are counted by person (Run.TallyIn).
	Directory *identity.Directory
	// VoterKeys are the principal keys of the voter's directory person's
	// aliases (PersonKeys), kept with the vote (Vote.Keys).
	VoterKeys []string
	// Choices are a vote's choices, one per held call the voter may decide
	// (VoteChoices); a whole-turn vote's are all its action.
	Choices []VoteChoice
	// StillAsked, when set, returns the inbox keys (SubjectKey) of those
	// who may still vote on next, the row after a vote that leaves it
	// waiting (OpenDeciders): the others' inbox entries go in the same
	// write. An empty answer removes nobody (it would mean nobody may
	// decide an open call, which the row cannot tell apart from a
	// directory that no longer resolves).
	StillAsked func(next *Run) map[string]bool
}

// VoteEventData is the data of a vote event (the voter is the event's actor).
type VoteEventData struct {
	SuspensionID string `json:"suspension_id"`
	TurnDigest   string `json:"turn_digest"`
	Via          string `json:"via"`
	// Action and Message are a whole-turn vote's ("" for a per-call vote).
	Action  loop.Action `json:"action,omitempty"`
	Message string      `json:"message,omitempty"`
	// Calls are the voter's choices, one per held call they may decide.
	Calls  []VoteChoice `json:"calls,omitempty"`
	Person string       `json:"person"`
	// Approvals is the number of votes with this one that approve at
	// least one held call; VotesNeeded how many approvals the suspension
	// needs (the most any held call needs); VotesMissing the most any held
	// call not yet approved or denied still needs after this vote.
	Approvals    int `json:"approvals"`
	VotesNeeded  int `json:"votes_needed"`
	VotesMissing int `json:"votes_missing"`
}

// Decide moves a WAITING_FOR_APPROVAL run whose current suspension is
// d.SuspensionID to RESUMING, storing the decision, decider and channel with
// a decision event and, through a link, consuming the token, in one write.
// It is conditional on the suspension, not on the caller's copy being the
// latest: if only the version moved (say, a notification was recorded) it
// re-reads and retries. Of concurrent deciders exactly one wins. A vote
// that leaves the run waiting drops the voter's inbox entry and rewrites
// the others' with the approvals so far, in the same write. Whether the
// decider may decide is the caller's check. Codes: EInvalid, ETooLarge, ENotFound,
// EConflict (decided, cancelled, other suspension, token used or bound
// elsewhere), EGone (approval window or link expired).
func (s *Store) Decide(ctx context.Context, cur *Run, d NewDecision) (*Run, error) {
	if d.Via == ViaLink {
		if d.Token == nil {
			return nil, Errorf(EInvalid, "a decision through a link needs its token")
		}
		if d.Decider == "" {
			d.Decider = d.Token.Approver
		}
		if d.Decider != d.Token.Approver {
			return nil, Errorf(EInvalid, "the decider of a link decision is the token's approver")
		}
	} else if d.Via != ViaAPI {
		return nil, Errorf(EInvalid, "decision channel %q: want %q or %q", d.Via, ViaAPI, ViaLink)
	}
	switch {
	case d.SuspensionID == "":
		return nil, Errorf(EInvalid, "suspension id is required")
	case d.Decider == "":
		return nil, Errorf(EInvalid, "decider is required")
	}
	if d.Decision.Action == "" && len(d.Decision.Calls) == 0 {
		return nil, Errorf(EInvalid, "the decision has neither a turn action nor per-call decisions")
	}
	body, err := loop.MarshalJSON(d.Decision)
	if err != nil {
		return nil, Errorf(EInvalid, "decision: %v", err)
	}
	if len(body) > MaxDecisionSize {
		return nil, Errorf(ETooLarge, "the decision is %d bytes as stored, over the %d-byte limit", len(body), MaxDecisionSize)
	}
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status != StatusWaiting {
			return nil, Write{}, Errorf(EConflict, "run %s is %s, not waiting for approval", cur.ID, cur.Status)
		}
		if cur.SuspensionID != d.SuspensionID {
			return nil, Write{}, Errorf(EConflict, "run %s waits on suspension %s, not %s", cur.ID, cur.SuspensionID, d.SuspensionID)
		}
		if !now.Before(cur.ApprovalDeadline) {
			return nil, Write{}, Errorf(EGone, "the approval window of run %s closed at %s", cur.ID, cur.ApprovalDeadline.UTC().Format(InstantLayout))
		}
		next := cur.Clone()
		w := Write{}
		final := true
		resumesOnly := false
		decision := d.Decision
		if cur.Voting() {
			// A vote: each held call is approved once as many distinct
			// persons as it needs approved it and denied by the first
			// denial; the run resumes once every held call is one or the
			// other, otherwise it keeps waiting with the vote recorded.
			// Conditional on the row's version like every write, so of
			// concurrent votes each is counted once, on the vote set it was
			// built on, and exactly one completes the turn.
			switch {
			case d.Voter == "" && d.Choices == nil:
				// One decision of the whole turn, built on the row before
				// a quorum check switched it to votes (nobody may decide
				// every held call under the directory in force): the
				// decider's choices are for the row as it is now.
				return nil, Write{}, Errorf(EConflict, "run %s: the held turn is decided by votes, call by call, not by one decision; read the run again", cur.ID)
			case d.Voter == "":
				return nil, Write{}, Errorf(EInvalid, "a vote needs the voter")
			}
			if err := checkChoices(cur, d); err != nil {
				return nil, Write{}, err
			}
			if v, ok := cur.VoteOf(d.Directory, d.Voter); ok {
				how := string(v.TurnAction())
				if how == "" {
					how = "per call"
				}
				return nil, Write{}, Errorf(EConflict, "%s already voted (%s) on this suspension", d.Decider, how)
			}
			if !decidesAnOpenCall(d.Directory, cur, d.Choices) && !turnDecided(cur.TallyIn(d.Directory)) {
				// Nothing left for this voter: every call they may decide
				// was approved or denied by the votes before (which also
				// bounds the votes a row holds). A row whose votes decide
				// every call but that still waits (the release before
				// per-call votes rewrote them: Vote.Action) takes the vote,
				// which then resumes it.
				return nil, Write{}, Errorf(EConflict, "every call %s may decide on this suspension is already approved or denied; the turn waits on the other approvers", d.Decider)
			}
			// A vote with no open call to choose for only resumes a turn the
			// votes before it decide already (under the directory in force:
			// see VoteChoices): it is kept with no choice, whatever it said.
			open := openChoices(d.Directory, cur, d.Choices)
			resumesOnly = len(open) == 0
			if resumesOnly && slices.ContainsFunc(d.Choices, func(ch VoteChoice) bool { return ch.Action != loop.ActionApprove }) {
				// As VoteChoices says of the copy it had (a vote cast
				// since may have decided the turn).
				return nil, Write{}, Errorf(EConflict, resumeOnlyDenial)
			}
			vote := Vote{By: d.Decider, Person: d.Voter, Keys: slices.Clone(d.VoterKeys[:min(len(d.VoterKeys), MaxVoteKeys)]), Via: d.Via, At: now, Whole: d.Decision.Action != "" && !resumesOnly}
			vote.Choices, vote.Reasons, vote.Edits = encodeChoices(cur.PendingCalls, open, vote.Whole)
			vote.Action = compatAction(vote.Choices, cur.PendingCalls)
			if vote.Whole {
				vote.Message = d.Decision.Message
			}
			next.Votes = append(next.Votes, vote)
			if len(vote.Edits) > 0 {
				// The decision the votes come to holds every edit of
				// every vote: it must stay within MaxDecisionSize.
				if n := editsSize(next); n > MaxDecisionSize {
					return nil, Write{}, Errorf(ETooLarge, "the decision the votes come to would be %d bytes as stored with this vote's edits, over the %d-byte limit; a larger edit is not possible: deny the call and say what to write instead", n, MaxDecisionSize)
				}
			}
			if i := slices.Index(next.InboxKeys, d.Voter); i >= 0 {
				// The voter has decided: the run no longer waits for them,
				// so it leaves their inbox (the others keep it).
				w.DropInbox = append(w.DropInbox, InboxKey{Approver: d.Voter, RunID: cur.ID, SuspendedAt: cur.SuspendedAt})
				next.InboxKeys = slices.Delete(next.InboxKeys, i, i+1) // next is cur's deep copy
			}
			tally := next.TallyIn(d.Directory)
			final = turnDecided(tally)
			if final {
				decision = resolvedDecision(next, tally, d.Decision)
			} else {
				if d.StillAsked != nil {
					// Those whose calls are all decided now have nothing
					// left to vote on: the run leaves their inbox too.
					if asked := d.StillAsked(next); len(asked) > 0 {
						for _, k := range slices.Clone(next.InboxKeys) {
							if !asked[k] {
								w.DropInbox = append(w.DropInbox, InboxKey{Approver: k, RunID: cur.ID, SuspendedAt: cur.SuspendedAt})
								next.InboxKeys = slices.DeleteFunc(next.InboxKeys, func(x string) bool { return x == k })
							}
						}
					}
				}
				// The run keeps waiting: the others' entries say how many
				// approvals are still missing (InboxEntry.VotesMissing).
				w.NewInbox = inboxEntries(next)
			}
			w.Events = append(w.Events, Event{Type: EventVote, Actor: d.Decider, Data: mustJSON(VoteEventData{
				SuspensionID: d.SuspensionID, TurnDigest: cur.TurnDigest, Via: d.Via, Action: vote.TurnAction(),
				Message: vote.Message, Calls: vote.choices(cur.PendingCalls),
				Person: d.Voter, Approvals: next.Approvals(), VotesNeeded: cur.VotesNeeded, VotesMissing: next.VotesMissingIn(d.Directory),
			})})
		} else if d.Voter != "" || d.Choices != nil {
			// A vote, built on a row that took votes, on a row that takes
			// one decision: a release before PerCallVotes rewrote the row
			// without it (and no vote was cast yet). Taken as the one
			// decision, a whole-turn approval of the voter's calls would
			// approve the others' too.
			return nil, Write{}, Errorf(EConflict, "run %s: the held turn is now decided by one decision of a person who may decide every held call, not by votes; read the run again", cur.ID)
		}
		decidedBy, decidedVia := d.Decider, d.Via
		if last, ok := lastDecidingVote(next, d.Directory); resumesOnly && ok {
			// The turn was decided by the votes before: the last of them
			// that decided a call is the decision's (its time is the
			// resumption's, as the decision event's is).
			decidedBy, decidedVia = last.By, last.Via
		}
		if final {
			data := DecisionEventData{SuspensionID: d.SuspensionID, TurnDigest: cur.TurnDigest, Via: decidedVia, Decision: decision}
			if cur.Voting() {
				data = withDeciders(data, next, d.Directory)
			}
			if resumesOnly {
				data.ResumedBy = d.Decider
			}
			w.Events = append(w.Events, Event{Type: EventDecision, Actor: decidedBy, Data: mustJSON(data)})
		}
		if d.Via == ViaLink {
			if d.Token.RunID != cur.ID || d.Token.SuspensionID != d.SuspensionID {
				return nil, Write{}, Errorf(EConflict, "approval link is for another suspension")
			}
			if err := d.Token.Usable(now); err != nil {
				return nil, Write{}, err
			}
			w.UseToken = &TokenUse{Hash: d.Token.Hash, RunID: cur.ID, SuspensionID: d.SuspensionID, At: now}
		}
		if final {
			next.Status = StatusResuming
			next.Decision = cloneDecision(&decision)
			next.DecidedBy, next.DecidedVia, next.DecidedAt = decidedBy, decidedVia, now
		}
		return next, w, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusWaiting && fresh.SuspensionID == d.SuspensionID
	})
}

// Notice reports what happened when approvers were told about the current
// suspension.
type Notice struct {
	// SuspensionID is the suspension the notice is about.
	SuspensionID string
	// State is NotificationSent or NotificationFailed.
	State NotificationState
	// Reminder marks a reminder rather than the first notification.
	Reminder bool
	// Data is the event payload (JSON, optional): channels, recipients.
	Data json.RawMessage
	// Actor is who sent the notification: the worker's lease owner for the
	// first one of a suspension, "purge" for the sweep's (its event's actor).
	Actor string
	// RetryAt, with State NotificationFailed, brings the run's reminder time
	// forward so the sweep mails the approvers again soon (a retry then
	// takes the place of the reminder). Ignored when not before RemindAt.
	// With Retry, it is when those mailboxes are mailed again instead.
	RetryAt time.Time
	// Retry, when set, makes the notice about the mail of these mailboxes
	// alone, not about the suspension's notification: the run's
	// notification state and reminder are left as they are. With State
	// NotificationFailed and RetryAt before the deadline,
	// RecordNotification adds them to the run's MailRetry, due at RetryAt
	// (the earlier, when a retry is due already); without RetryAt it
	// records the failure only (a retry that failed again). With
	// Renotify, it says that the notice is that retry: the mailboxes leave
	// MailRetry, and the tokens are theirs.
	Retry []string
	// RetryReminder, with Retry and State NotificationFailed, says their
	// failed mail was the reminder: their retry is mailed as the reminder
	// (Run.MailRetryReminders).
	RetryReminder bool
	// Recovered, given to Renotify, makes the notice the suspension's first
	// notification, sent by the sweep because the worker that held the
	// turn recorded none within FirstNoticeGrace (Run.FirstNoticeDue): it
	// takes the number the suspension kept for that notified event and
	// the run's notification state, and is refused (EConflict) once a
	// first notification is on record, so that of the worker's record and
	// the sweep's the first written is the only one.
	Recovered bool
}

// RecordNotification stores the notification state of a waiting run with a
// notified (or reminded) event. Like Decide it retries when only the version
// moved. The first notification of a suspension that kept a number for it
// (Suspension.Notify; cur is the row Suspend returned, or a later one of the
// same suspension with no notification recorded yet) is recorded under
// that number, and also once the run has moved on from the suspension (a
// decision came first): the mail went out, so the trail must say so. Its
// event is then written alone (RowStore.PutEvent), without the row, whose
// version and notification state stay as the run's later steps left them,
// so no worker's write is disturbed; the run is returned as stored. Being
// under one number, that event is recorded once however often it is
// tried. Codes: EInvalid, ENotFound, EConflict (not waiting on the
// suspension, for any other notification).
func (s *Store) RecordNotification(ctx context.Context, cur *Run, n Notice) (*Run, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	kept := n.keptSeq(cur)
	var recorded *Run
	r, err := s.retry(ctx, cur, func(cur *Run, _ time.Time) (*Run, Write, error) {
		if err := n.about(cur); err != nil {
			return nil, Write{}, err
		}
		if kept != 0 && cur.NoticeSeq != kept {
			// The number is taken: this first notification is on record.
			recorded = cur
			return nil, Write{}, errNoticeRecorded
		}
		next := cur.Clone()
		typ := EventNotified
		switch retry := ms(n.RetryAt); {
		case len(n.Retry) > 0:
			// The mail of some mailboxes: the suspension's notification
			// and its reminder stay as they are.
			if n.State == NotificationFailed && !retry.IsZero() && retry.Before(next.ApprovalDeadline) {
				for _, m := range n.Retry {
					if !slices.Contains(next.MailRetry, m) {
						next.MailRetry = append(next.MailRetry, m)
					}
					if n.RetryReminder && !slices.Contains(next.MailRetryReminders, m) {
						next.MailRetryReminders = append(next.MailRetryReminders, m)
					}
				}
				if next.MailRetryAt.IsZero() || retry.Before(next.MailRetryAt) {
					next.MailRetryAt = retry
				}
			}
		default:
			next.Notification = n.State
			if n.Reminder {
				typ = EventReminded
				next.ReminderSent = true
			}
			if n.State == NotificationFailed && !retry.IsZero() && !next.ReminderSent &&
				retry.Before(next.ApprovalDeadline) && (next.RemindAt.IsZero() || retry.Before(next.RemindAt)) {
				next.RemindAt = retry
			}
		}
		ev := Event{Type: typ, Actor: n.Actor, Data: cloneRaw(n.Data)}
		if kept != 0 {
			ev.Seq, next.NoticeSeq = kept, 0
		}
		return next, Write{Events: []Event{ev}}, nil
	}, func(fresh *Run) bool { return n.about(fresh) == nil })
	switch {
	case errors.Is(err, errNoticeRecorded):
		return recorded.Clone(), nil
	case kept == 0 || ErrorCode(err) != EConflict:
		return r, err
	}
	return s.recordLateNotice(ctx, cur.ID, kept, n, err)
}

// errNoticeRecorded tells RecordNotification that the first notification
// it was asked to record is on record already.
var errNoticeRecorded = errors.New("notice recorded")

// recordLateNotice records the first notification of a suspension the run
// has moved on from under the number the suspension kept for it, as an
// event alone; conflict is the error of the write that found the run no
// longer waiting on it.
func (s *Store) recordLateNotice(ctx context.Context, id string, kept int64, n Notice, conflict error) (*Run, error) {
	fresh, err := s.rows.GetRun(ctx, id)
	switch {
	case ErrorCode(err) == ENotFound:
		return nil, Errorf(ENotFound, "run %s not found", id)
	case err != nil:
		return nil, fmt.Errorf("record notification of run %s: %w", id, err)
	case n.about(fresh) == nil || kept > fresh.LastSeq:
		// Still waiting on the suspension (the retries ran out), or not
		// the row that kept the number.
		return nil, conflict
	}
	ev := Event{RunID: id, Seq: kept, Type: EventNotified, At: s.now(), Actor: n.Actor, Data: cloneRaw(n.Data)}
	switch err := s.rows.PutEvent(ctx, ev); ErrorCode(err) {
	case "":
		return fresh, nil
	case EConflict:
		// An event holds the number: this one, stored by an attempt whose
		// answer was lost (nothing else is ever stored under it). Read it
		// back rather than take the code's word for it: a notice said to be
		// on record must be.
		evs, rerr := s.rows.Events(ctx, id, kept-1, 1)
		if rerr != nil {
			return nil, fmt.Errorf("record notification of run %s: read back event %d: %w", id, kept, rerr)
		}
		if len(evs) == 0 || evs[0].Seq != kept {
			return nil, fmt.Errorf("record notification of run %s: event %d refused as stored but not found: %w", id, kept, err)
		}
		return fresh, nil
	case ENotFound:
		return nil, Errorf(ENotFound, "run %s not found", id)
	default:
		return nil, fmt.Errorf("record notification of run %s: %w", id, err)
	}
}

// keptSeq returns the number cur's suspension kept for the notice's event
// when the notice is that suspension's first notification (cur is of the
// suspension and records none yet), else 0.
func (n Notice) keptSeq(cur *Run) int64 {
	if cur == nil || n.Reminder || len(n.Retry) > 0 || cur.SuspensionID != n.SuspensionID || cur.Notification != NotificationPending {
		return 0
	}
	return cur.NoticeSeq
}

// validate checks a notice before any write: its state and its data.
func (n Notice) validate() error {
	if n.State != NotificationSent && n.State != NotificationFailed {
		return Errorf(EInvalid, "notification state %q: want %q or %q", n.State, NotificationSent, NotificationFailed)
	}
	if len(n.Retry) > 0 && n.Reminder {
		return Errorf(EInvalid, "a notice about some mailboxes' mail is no reminder")
	}
	if n.Recovered && (n.Reminder || len(n.Retry) > 0) {
		return Errorf(EInvalid, "a recovered first notification is neither a reminder nor a retry of some mailboxes' mail")
	}
	if n.RetryReminder && len(n.Retry) == 0 {
		return Errorf(EInvalid, "a notice of a failed reminder to retry names the mailboxes")
	}
	if len(n.Retry) > MaxApprovers {
		return Errorf(EInvalid, "a notice names %d mailboxes, more than the %d a suspension lists", len(n.Retry), MaxApprovers)
	}
	for _, m := range n.Retry {
		if m == "" || len(m) > 320 {
			return Errorf(EInvalid, "a notice names a mailbox that is empty or longer than 320 bytes")
		}
	}
	return checkJSON("notice data", n.Data, MaxEventDataSize, true)
}

// about returns nil when r still waits on the notice's suspension, and
// EConflict otherwise: a notice is recorded only on the suspension it tells
// about.
func (n Notice) about(r *Run) error {
	if r.Status != StatusWaiting || r.SuspensionID != n.SuspensionID {
		return Errorf(EConflict, "run %s is not waiting on suspension %s", r.ID, n.SuspensionID)
	}
	return nil
}

// ResumeDecided moves WAITING_FOR_APPROVAL run cur, whose votes decide
// every held call under dir (the directory in force) though it still waits
// (Run.DecidedByVotesIn: a directory change since the last vote), to
// RESUMING with what the votes decided, each held call approved or denied
// as the next approver's vote would resume it (Store.Decide; the decision
// is whole-turn where every vote was, where that vote's empty choice makes
// it per call): the decision and its event name the last vote that
// decided a call (by, via, the event's actor), with the deciders counted
// under dir, and the event says the sweep resumed it (resumed_by purge);
// its time is now. The sweep's quorum check takes this step,
// so that such a turn does not wait out its window when nobody votes. It
// is conditional on the row: EConflict when the run no longer waits on
// cur's suspension or its votes no longer decide it, EGone once the
// approval window closed.
func (s *Store) ResumeDecided(ctx context.Context, cur *Run, dir *identity.Directory) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	suspension := cur.SuspensionID
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		switch {
		case cur.Status != StatusWaiting || cur.SuspensionID != suspension:
			return nil, Write{}, Errorf(EConflict, "run %s no longer waits on suspension %s", cur.ID, suspension)
		case !now.Before(cur.ApprovalDeadline):
			return nil, Write{}, Errorf(EGone, "the approval window of run %s closed at %s", cur.ID, cur.ApprovalDeadline.UTC().Format(InstantLayout))
		case !cur.DecidedByVotesIn(dir):
			return nil, Write{}, Errorf(EConflict, "the votes on run %s do not decide every held call", cur.ID)
		}
		last, ok := lastDecidingVote(cur, dir)
		if !ok {
			return nil, Write{}, Errorf(EConflict, "no vote on run %s decided a held call", cur.ID)
		}
		next := cur.Clone()
		decision := resolvedDecision(next, next.TallyIn(dir), loop.Decision{TurnDigest: cur.TurnDigest, Message: last.Message})
		data := withDeciders(DecisionEventData{SuspensionID: suspension, TurnDigest: cur.TurnDigest, Via: last.Via, Decision: decision, ResumedBy: "purge"}, next, dir)
		w := Write{Events: []Event{{Type: EventDecision, Actor: last.By, Data: mustJSON(data)}}}
		next.Status = StatusResuming
		next.Decision = cloneDecision(&decision)
		next.DecidedBy, next.DecidedVia, next.DecidedAt = last.By, last.Via, now
		return next, w, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusWaiting && fresh.SuspensionID == suspension
	})
}
