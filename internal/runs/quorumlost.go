package runs

import (
	"slices"
	"time"
)

// LostCall marks a held call that a quorum check found can certainly no
// longer get its approvals (Run.QuorumLost): At is when a check first
// found it so, of the checks since that all found it so or could not tell.
type LostCall struct {
	CallID string    `json:"call_id"`
	At     time.Time `json:"at"`
}

// QuorumFinding is what one quorum check of a waiting run found, as the
// sweep gives it to Store.ReviseDeciders: At is when the check ran (the
// sweep's time, which the next check is scheduled from), Lost the held
// calls found certainly unable to get their approvals, Unsure those it
// could not tell about (an entry this build cannot read, or no directory
// at all). A call found lost keeps its mark, or is marked at At; a call it
// could not tell about keeps its mark, if any; every other mark goes (the
// call was found able to get its approvals, or is decided).
type QuorumFinding struct {
	At     time.Time
	Lost   []string
	Unsure []string
}

// LostSince returns when a quorum check first found held call id of r
// unable to get its approvals, and whether it is so marked (QuorumLost).
func (r *Run) LostSince(id string) (time.Time, bool) {
	for _, m := range r.QuorumLost {
		if m.CallID == id {
			return m.At, true
		}
	}
	return time.Time{}, false
}

// FirstLost returns the earliest mark of r's QuorumLost (zero: none).
func (r *Run) FirstLost() time.Time {
	var first time.Time
	for _, m := range r.QuorumLost {
		if first.IsZero() || m.At.Before(first) {
			first = m.At
		}
	}
	return first
}

// lostMarks returns the marks of cur's held calls after finding f
// (QuorumFinding), in the order of cur's held calls; an error names a call
// f found lost that cur does not hold for approval.
func lostMarks(cur *Run, f QuorumFinding) ([]LostCall, error) {
	held := map[string]bool{}
	for _, c := range cur.PendingCalls {
		if c.NeedsApproval {
			held[c.ID] = true
		}
	}
	for _, id := range f.Lost {
		if !held[id] {
			return nil, Errorf(EInvalid, "call %q found lost is not held for approval by run %s", id, cur.ID)
		}
	}
	if len(f.Lost) > 0 && f.At.IsZero() {
		return nil, Errorf(EInvalid, "a quorum check's finding needs its time")
	}
	var out []LostCall
	for _, c := range cur.PendingCalls {
		at, marked := cur.LostSince(c.ID)
		switch {
		case slices.Contains(f.Lost, c.ID) && !marked:
			out = append(out, LostCall{CallID: c.ID, At: ms(f.At)})
		case marked && (slices.Contains(f.Lost, c.ID) || slices.Contains(f.Unsure, c.ID)):
			out = append(out, LostCall{CallID: c.ID, At: at})
		}
	}
	return out, nil
}

// leaveQuorumCheck clears cur's quorum check (its next time and its marks)
// on next when next leaves cur's suspension: they are of that suspension
// only (a suspension schedules its own). Every transition goes through it
// (Store.write).
func leaveQuorumCheck(cur, next *Run) {
	if cur.Status != StatusWaiting || next.Status == StatusWaiting && next.SuspensionID == cur.SuspensionID {
		return
	}
	next.QuorumCheckAt, next.QuorumLost = time.Time{}, nil
}
