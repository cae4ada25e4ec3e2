package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
)

// VoteChoice is one voter's choice on one held call of a suspension that
// votes decide (Run.Voting): approve, deny with a message, or where each
// held call needs one approval (Run.VotesTakeEdits) edit, with the edited
// input, which approves the call with that input.
type VoteChoice struct {
	CallID  string          `json:"call_id"`
	Action  loop.Action     `json:"action"`
	Message string          `json:"message,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
}

// choices returns what vote v chose for each held call of calls (the
// suspension's PendingCalls): its Choices, or for a vote recorded before
// votes were per call (a whole-turn vote without Choices), its action for
// every call that needs approval.
func (v Vote) choices(calls []CallSummary) []VoteChoice {
	var out []VoteChoice
	if v.Choices == "" {
		for _, c := range calls {
			if c.NeedsApproval {
				out = append(out, VoteChoice{CallID: c.ID, Action: v.Action})
			}
		}
		return out
	}
	denials, edits := 0, 0
	for i := 0; i < len(v.Choices) && i < len(calls); i++ {
		switch v.Choices[i] {
		case 'a':
			out = append(out, VoteChoice{CallID: calls[i].ID, Action: loop.ActionApprove})
		case 'e':
			// An edit without its input (a release before edits in votes
			// rewrote the row, dropping Edits) is no choice: the call is
			// neither approved as it is nor as edited.
			if edits < len(v.Edits) && len(v.Edits[edits]) > 0 {
				out = append(out, VoteChoice{CallID: calls[i].ID, Action: loop.ActionEdit, Input: v.Edits[edits]})
			}
			edits++
		case 'd':
			ch := VoteChoice{CallID: calls[i].ID, Action: loop.ActionDeny}
			if v.Whole {
				ch.Message = v.Message // a whole-turn denial's one message
			} else if denials < len(v.Reasons) {
				ch.Message = v.Reasons[denials]
			}
			denials++
			out = append(out, ch)
		}
	}
	return out
}

// VotedKeys returns the keys under which those who voted on r's current
// suspension count as having voted (true for each), for subjects of dir,
// the directory in force (identity.Subject.Key): see Vote.keys.
func VotedKeys(dir *identity.Directory, r *Run) map[string]bool {
	out := map[string]bool{}
	for _, v := range r.Votes {
		for _, k := range v.keys(dir) {
			out[k] = true
		}
	}
	return out
}

// VoteOf returns the vote on r's current suspension of the voter whose key
// under dir (the directory in force) is key (SubjectKey), if any (see
// VotedKeys).
func (r *Run) VoteOf(dir *identity.Directory, key string) (Vote, bool) {
	if key == "" {
		return Vote{}, false
	}
	for _, v := range r.Votes {
		if slices.Contains(v.keys(dir), key) {
			return v, true
		}
	}
	return Vote{}, false
}

// keys are the subject keys that vote v stands for under dir, the
// directory in force: every subject dir links to the voter as they were
// when they voted. That is the person of the id they voted under (if dir
// has an entry of that id, or an entry that lists it among its former ids:
// a rename the directory records, identity.Directory.RecordedPerson),
// whoever the principal they voted as is now,
// and whoever each alias the vote kept (Vote.Keys) is now, a person or the
// bare principal; a vote cast by a principal without an entry stands for
// that principal too. With no directory (dir nil: none in force, or the
// votes as cast) a vote stands for the person it was cast as, the
// principal, and every alias it kept, each as itself.
//
// So a person counts once and votes once whatever was renamed, merged,
// moved or dropped, as long as dir keeps any link to them (their id, or
// one alias the vote kept). What a vote keeps cannot tell a rename from an
// alias or an id handed to someone new, so the rule takes the safe side:
// one who now holds a voter's former id or one of their aliases counts as
// that voter on the suspension they voted on (an alias passed on, on an
// on-call rota say, makes its new holder "already voted" there). A person
// whose id and every kept alias changed at once is, to the directory,
// someone new, unless their entry lists the id they voted under among its
// former ids.
func (v Vote) keys(dir *identity.Directory) []string {
	out := make([]string, 0, 3+len(v.Keys))
	add := func(k string) {
		if k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	switch p, ok := dir.RecordedPerson(v.Person); {
	case ok:
		// The person of the id they voted under, or the person the
		// directory says was renamed from it (former_ids).
		add("person:" + p.ID)
	case dir == nil || !strings.HasPrefix(v.Person, "person:"):
		add(v.Person)
	}
	add(SubjectKey(dir, v.By))
	for _, k := range v.Keys {
		add(dir.KeyOf(k))
	}
	return out
}

// current is the key of the subject vote v is named after under dir: the
// directory person it was cast by, whatever dir says of them now (a
// renamed or dropped person is named as they voted, never after whoever
// holds their former alias: reports name who voted, though the count
// takes the safe side, Vote.keys); for a principal without an entry then,
// the subject it is under dir (the person an entry added since makes it).
func (v Vote) current(dir *identity.Directory) string {
	if strings.HasPrefix(v.Person, "person:") {
		return v.Person
	}
	if k := SubjectKey(dir, v.By); k != "" {
		return k
	}
	return v.Person
}

// sameVoter reports whether votes a and b may be one voter's under dir,
// the directory in force: whether dir links them to a common subject
// (Vote.keys). A person votes once, and a quorum counts persons, whatever
// the directory said when each vote was cast.
func sameVoter(dir *identity.Directory, a, b Vote) bool {
	kb := b.keys(dir)
	for _, k := range a.keys(dir) {
		if slices.Contains(kb, k) {
			return true
		}
	}
	return false
}

// RecordedKey returns the key under dir, the directory in force, of key,
// a subject key recorded under the directory of the time (Vote.Person,
// Run.InitiatorPerson, ApprovalToken.Person): for a directory person's
// "person:<id>", the key of the person dir gives that id, or of the one
// that lists it among its former ids (renamed since:
// identity.Directory.RecordedPerson); any other key as recorded (so a
// person id nobody has or lists now is nobody's key).
func RecordedKey(dir *identity.Directory, key string) string {
	if p, ok := dir.RecordedPerson(key); ok {
		return "person:" + p.ID
	}
	return key
}

// initiatorVote is r's initiator as a vote keeps its voter, for four-eyes
// under the directory in force: whoever dir links to the initiator as
// they were at the start (Vote.keys) is the initiator's person. A run
// started before the initiator was kept so is its principal alone.
func (r *Run) initiatorVote() Vote {
	return Vote{By: r.Initiator, Person: r.InitiatorPerson, Keys: r.InitiatorKeys}
}

// initiatorCovers reports whether dir links subject s to r's initiator
// (Run.initiatorVote): under four-eyes s may not decide.
func (r *Run) initiatorCovers(dir *identity.Directory, s identity.Subject) bool {
	k := s.Key()
	return k != "" && slices.Contains(r.initiatorVote().keys(dir), k)
}

// PersonKeys returns the principal keys of the aliases of the directory
// person decider is under dir (at most MaxVoteKeys of them), which a vote
// of theirs keeps (Vote.Keys); nil for a decider without an entry.
func PersonKeys(dir *identity.Directory, decider string) []string {
	p, err := identity.Parse(decider)
	if err != nil {
		return nil
	}
	s := dir.Lookup(p)
	if s.Person == nil {
		return nil
	}
	var out []string
	for _, a := range s.Person.Aliases {
		if k := a.Key(); k != "" && !slices.Contains(out, k) && len(out) < MaxVoteKeys {
			out = append(out, k)
		}
	}
	return out
}

// MaxVoteKeys bounds the alias keys a vote keeps (Vote.Keys).
const MaxVoteKeys = 16

// Name is who the vote counts for, as reports name voters (the run's
// deciders, who approved or denied a call, the approval page and mail):
// the directory person's id when the voter was one of a directory
// person's aliases as the vote was cast (Person "person:<id>"), so that a
// person is named the same whichever alias they voted with; anyone else
// by their principal: an e-mail address in its comparison form
// (identity.Principal.Key: lowercased, without a +tag, as the vote counted
// it), so that Gina@Example.com and gina+x@example.com are one name, as
// they are one vote; other principals as written (an assumed-role ARN
// keeps its session). By keeps the alias as authenticated, for the audit.
func (v Vote) Name() string { return v.NameIn(nil) }

// NameIn is Name under dir, the directory in force (nil: as the vote was
// cast): the person the vote counts for now (Vote.current), should dir
// have dropped, renamed or merged the voter's entry, or added one.
func (v Vote) NameIn(dir *identity.Directory) string {
	key := v.Person
	if dir != nil {
		key = v.current(dir)
	}
	if id, ok := strings.CutPrefix(key, "person:"); ok && id != "" {
		return id
	}
	if p, err := identity.Parse(v.By); err == nil {
		if _, ok := p.Mailbox(); ok {
			return p.Key()
		}
		return p.String()
	}
	return v.By
}

// CallChoices returns what the vote chose for each held call of calls (the
// suspension's PendingCalls), in turn order.
func (v Vote) CallChoices(calls []CallSummary) []VoteChoice { return v.choices(calls) }

// TurnAction is the voter's whole-turn choice, approve or deny ("" for a
// per-call vote): Action for a vote recorded before votes were per call.
func (v Vote) TurnAction() loop.Action {
	switch {
	case v.Choices == "":
		return v.Action
	case !v.Whole:
		return ""
	case strings.Contains(v.Choices, "d"):
		return loop.ActionDeny
	}
	return loop.ActionApprove
}

// compatAction is the Action stored with a vote of choices on calls (see
// Vote.Action): approve when it approves every held call as it is, deny
// when it denies any, "" otherwise (an edit is not an approval of the call
// as it is, which is all a release before edits in votes could read).
func compatAction(choices string, calls []CallSummary) loop.Action {
	if strings.Contains(choices, "d") {
		return loop.ActionDeny
	}
	for i, c := range calls {
		if c.NeedsApproval && (i >= len(choices) || choices[i] != 'a') {
			return ""
		}
	}
	return loop.ActionApprove
}

// encodeChoices returns the stored form of a vote's choices on calls
// (Vote.Choices, Vote.Reasons: none for a whole-turn vote, whose message
// is Vote.Message, and Vote.Edits); checkChoices has validated them.
func encodeChoices(calls []CallSummary, chs []VoteChoice, whole bool) (string, []string, []json.RawMessage) {
	by := make(map[string]VoteChoice, len(chs))
	for _, ch := range chs {
		by[ch.CallID] = ch
	}
	b := make([]byte, len(calls))
	var reasons []string
	var edits []json.RawMessage
	said := false
	for i, c := range calls {
		ch, ok := by[c.ID]
		switch {
		case !ok:
			b[i] = '-'
		case ch.Action == loop.ActionApprove:
			b[i] = 'a'
		case ch.Action == loop.ActionEdit:
			b[i] = 'e'
			edits = append(edits, slices.Clone(ch.Input))
		default:
			b[i] = 'd'
			reasons = append(reasons, ch.Message)
			said = said || ch.Message != ""
		}
	}
	if !said || whole {
		reasons = nil
	}
	return string(b), reasons, edits
}

// CallTally is the vote progress of one held call that needs approval
// by votes: it is approved once Needed distinct persons approved it,
// and denied as soon as one person who may decide it denied it.
type CallTally struct {
	CallID string
	// Needed is how many distinct persons must approve the call
	// (CallSummary.RequiredApprovals).
	Needed int
	// ApprovedBy are the voters (Vote.Name: the person, whatever alias
	// they voted with) who approved it, in order.
	ApprovedBy []string
	// DeniedBy is the first voter who denied it ("": nobody), with the
	// message they gave.
	DeniedBy    string
	DenyMessage string
	// Edited is the input the call is approved with when the approval
	// that approved it was an edit (only where each held call needs one
	// approval: Run.VotesTakeEdits); nil otherwise.
	Edited json.RawMessage
}

// Denied reports whether a voter denied the call.
func (t CallTally) Denied() bool { return t.DeniedBy != "" }

// Approved reports whether the call has the approvals it needs and no denial.
func (t CallTally) Approved() bool { return !t.Denied() && len(t.ApprovedBy) >= t.Needed }

// Decided reports whether the call is approved or denied.
func (t CallTally) Decided() bool { return t.Denied() || t.Approved() }

// StillNeeded returns how many approvals the call still needs (0 once decided).
func (t CallTally) StillNeeded() int {
	if t.Decided() {
		return 0
	}
	return t.Needed - len(t.ApprovedBy)
}

// Tally returns the vote progress of each held call of r that needs
// approval, in turn order, from the votes cast on the current suspension.
// A person votes once per suspension (Store.Decide), so each approval is
// a distinct person's as the directory stood at each vote; TallyIn counts
// them under the directory in force.
//
// A call needs the approvals its rule asks for (CallSummary.
// RequiredApprovals); a suspension recorded with a quorum above what every
// one of its calls asks for (Suspension.VotesNeeded: calls that do not
// carry their terms) applies that quorum to each held call.
func (r *Run) Tally() []CallTally { return r.TallyIn(nil) }

// TallyIn is Tally under dir, the directory in force: votes that may be
// one voter's under it (sameVoter: dir links them to a common subject,
// say principals that voted apart and that dir has made one person since)
// approve a call once, and under four-eyes a vote dir links to the
// initiator (Run.initiatorVote) approves nothing.
func (r *Run) TallyIn(dir *identity.Directory) []CallTally {
	var out []CallTally
	// approving are the votes that approved each call so far, counted or
	// not: a vote linked to any of them is one of the persons who did.
	approving := map[string][]Vote{}
	at := map[string]int{}
	fourEyes := map[string]bool{}
	initiator := r.initiatorVote()
	uniform := VotesNeeded(r.PendingCalls) < r.VotesNeeded
	for _, c := range r.PendingCalls {
		if c.NeedsApproval {
			fourEyes[c.ID] = r.FourEyes || c.Approval != nil && c.Approval.FourEyes
			at[c.ID] = len(out)
			n := c.RequiredApprovals()
			if uniform {
				n = r.VotesNeeded
			}
			out = append(out, CallTally{CallID: c.ID, Needed: n})
		}
	}
	for _, v := range r.Votes {
		for _, ch := range v.choices(r.PendingCalls) {
			i, ok := at[ch.CallID]
			if !ok || out[i].Decided() {
				// A call is decided by the first votes that approve it as
				// often as it needs or deny it; later choices on it count
				// for nothing (Store.Decide refuses a vote with no other).
				continue
			}
			approves := ch.Action == loop.ActionApprove || ch.Action == loop.ActionEdit && out[i].Needed == 1
			if approves {
				before := approving[ch.CallID]
				approving[ch.CallID] = append(before, v)
				if slices.ContainsFunc(before, func(u Vote) bool { return sameVoter(dir, u, v) }) {
					continue // this person approved the call already
				}
				if fourEyes[ch.CallID] && sameVoter(dir, initiator, v) {
					// Four-eyes, under the directory in force: a voter it
					// links to the initiator approves nothing.
					continue
				}
			}
			switch t := &out[i]; ch.Action {
			case loop.ActionApprove:
				t.ApprovedBy = append(t.ApprovedBy, v.NameIn(dir))
			case loop.ActionEdit:
				if t.Needed != 1 {
					// Store.Decide takes edits only where each call needs
					// one approval; any other is no approval of the call
					// as it is.
					continue
				}
				t.ApprovedBy, t.Edited = append(t.ApprovedBy, v.NameIn(dir)), ch.Input
			case loop.ActionDeny:
				if t.DeniedBy == "" {
					t.DeniedBy, t.DenyMessage = v.NameIn(dir), ch.Message
				}
			}
		}
	}
	return out
}

// CallTally returns the vote progress of r's held call id, false when it
// is not a held call that needs approval.
func (r *Run) CallTally(id string) (CallTally, bool) {
	for _, t := range r.Tally() {
		if t.CallID == id {
			return t, true
		}
	}
	return CallTally{}, false
}

// DecidedCall says who decided one held call by votes: the voters
// (Vote.Name: persons, not the aliases they voted with) whose approvals
// approved it, as many as it needed and in the
// order they voted (Action approve, or edit when the one approval it
// needed was an edit), or the one voter who denied it.
type DecidedCall struct {
	CallID string      `json:"call_id"`
	Tool   string      `json:"tool"`
	Action loop.Action `json:"action"`
	By     []string    `json:"by"`
}

// DecidedCalls returns who decided each held call of r that needs
// approval and is approved or denied by the votes (Voting), in turn order
// (all of them once the turn is decided); nil when one decision decides
// r's turn (DecidedBy made it).
func (r *Run) DecidedCalls() []DecidedCall { return r.DecidedCallsIn(nil) }

// DecidedCallsIn is DecidedCalls counted and named under dir, the
// directory in force (TallyIn, Vote.NameIn), as Store.Decide decided them.
func (r *Run) DecidedCallsIn(dir *identity.Directory) []DecidedCall {
	if !r.Voting() {
		return nil
	}
	var out []DecidedCall
	for _, t := range r.TallyIn(dir) {
		dc := DecidedCall{CallID: t.CallID, Tool: toolOf(r, t.CallID)}
		switch {
		case t.Denied():
			dc.Action, dc.By = loop.ActionDeny, []string{t.DeniedBy}
		case t.Approved() && t.Edited != nil:
			dc.Action, dc.By = loop.ActionEdit, slices.Clone(t.ApprovedBy)
		case t.Approved():
			dc.Action, dc.By = loop.ActionApprove, slices.Clone(t.ApprovedBy)
		default:
			continue
		}
		out = append(out, dc)
	}
	return out
}

// DecidingVoters returns, when votes decide r's turn (Voting), the voters
// (Vote.Name: persons) whose votes decided at least one held call of r
// (DecidedCalls), each once, in the order they voted: those who decided
// r's turn once it is decided. Nil when one decision decides r's turn
// (DecidedBy made it).
func (r *Run) DecidingVoters() []string { return r.DecidingVotersIn(nil) }

// DecidingVotersIn is DecidingVoters under dir (DecidedCallsIn).
func (r *Run) DecidingVotersIn(dir *identity.Directory) []string {
	decided := map[string]bool{}
	for _, dc := range r.DecidedCallsIn(dir) {
		for _, by := range dc.By {
			decided[by] = true
		}
	}
	var out []string
	for _, v := range r.Votes {
		if n := v.NameIn(dir); decided[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// maxDecidersSize bounds what a decision event's Deciders and
// DecidedCalls add to it (JSON): far above what real quorums come to,
// it keeps the event under MaxEventDataSize whatever the votes.
const maxDecidersSize = 32 << 10

// withDeciders returns data with r's deciders (DecisionEventData.Deciders
// and DecidedCalls, under dir, the directory the votes were counted
// under), fitted to maxDecidersSize: DecidedCalls is left out
// when both do not fit, and then Deciders cut short.
func withDeciders(data DecisionEventData, r *Run, dir *identity.Directory) DecisionEventData {
	data.Deciders, data.DecidedCalls = r.DecidingVotersIn(dir), r.DecidedCallsIn(dir)
	size := func() int {
		b, err := json.Marshal(struct {
			D []string      `json:"deciders,omitempty"`
			C []DecidedCall `json:"decided_calls,omitempty"`
		}{data.Deciders, data.DecidedCalls})
		if err != nil {
			return maxDecidersSize + 1
		}
		return len(b)
	}
	if size() <= maxDecidersSize {
		return data
	}
	data.DecidedCalls, data.DecidersCut = nil, true
	for len(data.Deciders) > 0 && size() > maxDecidersSize {
		data.Deciders = data.Deciders[:len(data.Deciders)/2]
	}
	return data
}

// turnDecided reports whether every held call that needs approval is
// approved or denied.
func turnDecided(tally []CallTally) bool {
	for _, t := range tally {
		if !t.Decided() {
			return false
		}
	}
	return true
}

// resolvedDecision is the decision a quorum's votes on r come to once
// every held call is decided (turnDecided), last being the vote that
// completed it. When every vote was on the whole turn and covered every
// held call (as every vote the release before per-call votes recorded
// did) and every call came out the same, it is a whole-turn action, as
// that release stored it: approve with the last voter's note, or deny
// with the message of the one who denied. Otherwise it is one decision
// per held call that needs approval: approve (edit, with the edited input,
// when the approval that approved it was an edit), or deny with the
// message of the person who denied it.
func resolvedDecision(r *Run, tally []CallTally, last loop.Decision) loop.Decision {
	// The whole-turn form only when it says exactly what the calls came
	// to: every vote on the whole turn and covering every held call, and
	// every call approved, or every call denied. A call approved for good
	// is never denied by a later whole-turn denial of the others.
	whole := true
	denied := 0
	for _, v := range r.Votes {
		if v.TurnAction() == "" || len(v.choices(r.PendingCalls)) != len(tally) {
			whole = false
		}
	}
	for _, t := range tally {
		if t.Denied() {
			denied++
		}
		if t.Edited != nil {
			whole = false // an edit is per call (and no whole-turn vote holds one)
		}
	}
	if whole && denied == 0 {
		return loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove, Message: last.Message}
	}
	if whole && denied == len(tally) {
		return loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionDeny, Message: tally[0].DenyMessage}
	}
	d := loop.Decision{TurnDigest: r.TurnDigest}
	for _, t := range tally {
		cd := loop.CallDecision{CallID: t.CallID, Action: loop.ActionApprove}
		switch {
		case t.Denied():
			cd.Action, cd.Message = loop.ActionDeny, t.DenyMessage
		case t.Edited != nil:
			cd.Action, cd.Input = loop.ActionEdit, slices.Clone(t.Edited)
		}
		d.Calls = append(d.Calls, cd)
	}
	fitDenials(&d, denied)
	return d
}

// editsSize returns the size as stored of the decision r's votes come to
// without its denial messages (which fitDenials cuts to what is left): one
// per held call that needs approval, approved, or edited with the input of
// the vote that approved it.
func editsSize(r *Run) int {
	d := loop.Decision{TurnDigest: r.TurnDigest}
	for _, t := range r.Tally() {
		cd := loop.CallDecision{CallID: t.CallID, Action: loop.ActionApprove}
		if t.Edited != nil {
			cd.Action, cd.Input = loop.ActionEdit, t.Edited
		}
		d.Calls = append(d.Calls, cd)
	}
	b, err := loop.MarshalJSON(d)
	if err != nil {
		return MaxDecisionSize + 1
	}
	return len(b)
}

// fitDenials cuts the denial messages of d, a decision resolved from
// votes, to an equal share each when d would be over MaxDecisionSize: a
// whole-turn denial's one message is repeated on every call it denies.
func fitDenials(d *loop.Decision, denied int) {
	if denied == 0 {
		return
	}
	if b, err := json.Marshal(d); err == nil && len(b) <= MaxDecisionSize {
		return
	}
	bare := *d
	bare.Calls = slices.Clone(d.Calls)
	for i := range bare.Calls {
		bare.Calls[i].Message = ""
	}
	b, err := json.Marshal(bare)
	if err != nil {
		return
	}
	// A message's JSON may take up to 6 bytes per byte (\u escapes).
	share := max((MaxDecisionSize-len(b))/denied/6, 0)
	for i := range d.Calls {
		if m := d.Calls[i].Message; m != "" {
			d.Calls[i].Message = cutText(m, share, "…")
		}
	}
}

// checkChoices validates the choices of a vote on cur: at least one, each
// on a held call that needs approval, once, approve or deny (a whole-turn
// vote's all its action) or, where each held call needs one approval
// (VotesTakeEdits), edit with an input (a JSON object), a message only
// with a denial. The edit's input is the caller's check against the
// tool's schema and the policy (loop.ValidateVote).
func checkChoices(cur *Run, d NewDecision) error {
	if len(d.Choices) == 0 {
		return Errorf(EInvalid, "a vote needs the voter's choices, one per held call they may decide")
	}
	held := map[string]bool{}
	for _, c := range cur.PendingCalls {
		if c.NeedsApproval {
			held[c.ID] = true
		}
	}
	seen := map[string]bool{}
	said := len(d.Decision.Message)
	for _, ch := range d.Choices {
		if d.Decision.Action == "" {
			said += len(ch.Message)
		}
		switch {
		case !held[ch.CallID]:
			return Errorf(EInvalid, "vote on call %q, which is not held for approval in this turn", ch.CallID)
		case seen[ch.CallID]:
			return Errorf(EInvalid, "vote on call %q twice", ch.CallID)
		case ch.Action == loop.ActionEdit && !cur.VotesTakeEdits():
			return Errorf(EInvalid, "vote on call %q: this turn needs approvals from more than one person, so a vote cannot edit its calls", ch.CallID)
		case ch.Action == loop.ActionEdit && !isJSONObject(ch.Input):
			return Errorf(EInvalid, "vote on call %q: an edit needs the edited input, a JSON object", ch.CallID)
		case ch.Action != loop.ActionEdit && len(ch.Input) > 0:
			return Errorf(EInvalid, "vote on call %q: an input goes with an edit", ch.CallID)
		case ch.Action != loop.ActionApprove && ch.Action != loop.ActionDeny && ch.Action != loop.ActionEdit:
			return Errorf(EInvalid, "a vote approves, denies or edits a call, not %q", ch.Action)
		case d.Decision.Action != "" && ch.Action != d.Decision.Action:
			return Errorf(EInvalid, "a whole-turn vote's choices must all be %s", d.Decision.Action)
		case ch.Message != "" && (ch.Action != loop.ActionDeny || d.Decision.Action != "" && ch.Message != d.Decision.Message):
			return Errorf(EInvalid, "a vote's message goes with a denial")
		}
		seen[ch.CallID] = true
	}
	if said > MaxVoteMessagesSize {
		return Errorf(ETooLarge, "the vote's messages are %d bytes together, over the %d-byte limit of a vote (every vote stays on the run until the turn is decided)", said, MaxVoteMessagesSize)
	}
	return nil
}

// DecidableCalls returns the ids of r's held calls that need approval
// and that decider may decide (approver of the call's rule or of the run,
// the tool gate, four-eyes: MayDecide on that call alone), in turn order,
// and the refusal of the first call they may not decide, by id (nil when
// they may decide every one).
func DecidableCalls(dir *identity.Directory, r *Run, decider string) (ids []string, refused map[string]error) {
	for _, c := range r.PendingCalls {
		if !c.NeedsApproval {
			continue
		}
		one := *r
		one.PendingCalls = []CallSummary{c}
		if err := mayDecideAll(dir, &one, decider); err != nil {
			if refused == nil {
				refused = map[string]error{}
			}
			refused[c.ID] = err
			continue
		}
		ids = append(ids, c.ID)
	}
	return ids, refused
}

// OpenCalls returns those of ids (held calls of r) that are neither
// approved nor denied yet by the votes on r's turn (counted under dir,
// the directory in force: TallyIn), in their order; all
// of them when one decision decides it (Voting).
func (r *Run) OpenCalls(dir *identity.Directory, ids []string) []string {
	if !r.Voting() {
		return ids
	}
	open := r.openCalls(dir)
	var out []string
	for _, id := range ids {
		if open[id] {
			out = append(out, id)
		}
	}
	return out
}

// openCalls returns the ids of r's held calls that need approval and are
// neither approved nor denied yet (Tally).
func (r *Run) openCalls(dir *identity.Directory) map[string]bool {
	open := map[string]bool{}
	for _, t := range r.TallyIn(dir) {
		if !t.Decided() {
			open[t.CallID] = true
		}
	}
	return open
}

// OpenDeciders returns who may still decide on r's held turn: when votes
// decide it (Voting), those who may decide a held call that is neither
// approved nor denied yet, per call; otherwise those who may decide every
// held call (Eligible).
func OpenDeciders(dir *identity.Directory, r *Run) []identity.Eligible {
	if !r.Voting() {
		return Eligible(dir, r, r.PendingCalls)
	}
	open := r.openCalls(dir)
	var calls []CallSummary
	for _, c := range r.PendingCalls {
		if open[c.ID] {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return nil
	}
	// Per call whatever these calls alone need: a vote is per call.
	return decidersPerCall(dir, r, calls)
}

// VoteChoices turns decision d of decider on r's held turn, which votes
// decide (Voting), into the voter's choices: a whole-turn action is
// that choice for every held call they may decide; per-call decisions must
// give a choice for every such call (EInvalid naming a missing one) and
// none for a held call they may not decide (EForbidden naming it); only
// the calls not yet approved or denied take choices (a choice on a decided
// call is left out, and a voter with none left is EConflict). A
// per-call approve of a call that needs no approval changes nothing and is
// left out. The shape of d and its digest are loop.ValidateVote's check;
// a decider who may decide none of the held calls is MayDecide's refusal.
func VoteChoices(dir *identity.Directory, r *Run, decider string, d loop.Decision) ([]VoteChoice, error) {
	if err := MayDecide(dir, r, decider); err != nil {
		return nil, err
	}
	ids, refused := DecidableCalls(dir, r, decider)
	if !r.DecidedByVotesIn(dir) {
		ids = r.OpenCalls(dir, ids)
	} else if d.Action == loop.ActionDeny || slices.ContainsFunc(d.Calls, func(cd loop.CallDecision) bool { return cd.Action != loop.ActionApprove }) {
		// A vote here chooses nothing: a denial or an edit would be taken
		// and count for nothing, and the turn resume as the votes decided.
		return nil, Errorf(EConflict, resumeOnlyDenial)
	}
	// else the votes cast decide every held call under the directory in
	// force, though the run still waits (a change of the directory since
	// the last vote, say one that no longer links two voters): the vote
	// is taken, and resumes the run with what the votes came to
	// (Store.Decide).
	if len(ids) == 0 {
		return nil, Errorf(EConflict, "every call %s may decide on this suspension is already approved or denied; the turn waits on the other approvers", decider)
	}
	if d.Action != "" {
		out := make([]VoteChoice, 0, len(ids))
		for _, id := range ids {
			ch := VoteChoice{CallID: id, Action: d.Action}
			if d.Action == loop.ActionDeny {
				ch.Message = d.Message
			}
			out = append(out, ch)
		}
		return out, nil
	}
	given := map[string]loop.CallDecision{}
	for _, cd := range d.Calls {
		if err, ok := refused[cd.CallID]; ok {
			msg := err.Error()
			var ref *identity.Refusal
			if errors.As(err, &ref) {
				msg = ref.Message
			}
			return nil, Errorf(EForbidden, "call %q: %s; leave it out of your vote (its approvers decide it)", cd.CallID, msg)
		}
		given[cd.CallID] = cd
	}
	out := make([]VoteChoice, 0, len(ids))
	for _, id := range ids {
		cd, ok := given[id]
		if !ok {
			return nil, Errorf(EInvalid, "call %q (%s) needs a decision: a per-call vote decides every held call you may decide", id, toolOf(r, id))
		}
		ch := VoteChoice{CallID: id, Action: cd.Action}
		switch cd.Action {
		case loop.ActionDeny:
			ch.Message = cd.Message
		case loop.ActionEdit:
			ch.Input = slices.Clone(cd.Input)
		}
		out = append(out, ch)
	}
	return out, nil
}

// isJSONObject reports whether b is a JSON object (an edit's input, as a
// tool's input is).
func isJSONObject(b json.RawMessage) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func toolOf(r *Run, id string) string {
	for _, c := range r.PendingCalls {
		if c.ID == id {
			return c.Tool
		}
	}
	return ""
}

// openChoices returns the choices of choices on calls of cur that are
// neither approved nor denied (TallyIn dir). Choices are built on the voter's copy of the
// run (VoteChoices leaves out the calls decided on it); a call another vote
// decided since is left out as well: its choice would count for nothing,
// and stored it would count the voter among those who approved.
func openChoices(dir *identity.Directory, cur *Run, choices []VoteChoice) []VoteChoice {
	open := cur.openCalls(dir)
	out := make([]VoteChoice, 0, len(choices))
	for _, ch := range choices {
		if open[ch.CallID] {
			out = append(out, ch)
		}
	}
	return out
}

// decidesAnOpenCall reports whether choices choose for at least one held
// call of cur that is neither approved nor denied yet.
func decidesAnOpenCall(dir *identity.Directory, cur *Run, choices []VoteChoice) bool {
	open := cur.openCalls(dir)
	for _, ch := range choices {
		if open[ch.CallID] {
			return true
		}
	}
	return false
}

// resumeOnlyDenial refuses a denial or an edit on a turn the votes cast
// decide already (Run.DecidedByVotesIn).
const resumeOnlyDenial = "the votes cast on this suspension decide every held call already (the directory changed since the last vote), so a denial or an edit would count for nothing: approve to resume the run with what they decided"

// DecidedByVotesIn reports whether the votes cast on r's held turn,
// counted under dir (the directory in force), decide every held call,
// though the run still waits: a change of the directory since the last
// vote (say one that no longer links two voters) can leave a turn so. Any
// approver's next vote, by API or link, resumes it (VoteChoices,
// Store.Decide).
func (r *Run) DecidedByVotesIn(dir *identity.Directory) bool {
	return r.Voting() && len(r.Votes) > 0 && turnDecided(r.TallyIn(dir))
}

// lastDecidingVote returns the last vote on r's turn that decided a held
// call (DecidingVotersIn dir), if any.
func lastDecidingVote(r *Run, dir *identity.Directory) (Vote, bool) {
	deciders := r.DecidingVotersIn(dir)
	for i := len(r.Votes) - 1; i >= 0; i-- {
		if v := r.Votes[i]; slices.Contains(deciders, v.NameIn(dir)) {
			return v, true
		}
	}
	return Vote{}, false
}

// ChoseNothing reports whether the vote has choices and none of them
// chose (a vote that only resumed a turn the votes before it decided).
func (v Vote) ChoseNothing() bool {
	return v.Choices != "" && strings.Trim(v.Choices, "-") == ""
}

// NameOf is how reports would name decider under dir: the Name of a vote
// they cast now.
func NameOf(dir *identity.Directory, decider string) string {
	return Vote{By: decider, Person: SubjectKey(dir, decider)}.Name()
}
