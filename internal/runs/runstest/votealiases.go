package runstest

// A person whose every alias changed, keeping their id, votes once
// (reviewer helper-99 R1, at the store: failed on c753fc7 on both stores).

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// testVoteAfterEveryAliasChanged: ann votes as ann@old.example.com; the
// directory then gives her entry (same id) the alias ann@new.example.com
// instead. Her second vote, as person:ann, must be 409.
func testVoteAfterEveryAliasChanged(t *testing.T, e *Env) {
	ctx := t.Context()
	r, _ := e.waitingQuorum(t, 2)
	dir := func(alias string) *identity.Directory {
		d, err := identity.DecodeDirectory([]byte(`{"version": 1, "persons": [{"id": "ann", "aliases": ["` + alias + `"]}, {"id": "bob", "aliases": ["bob@example.com"]}]}`))
		require.NoError(t, err)
		return d
	}
	vote := func(who string, d *identity.Directory) runs.NewDecision {
		return runs.NewDecision{SuspensionID: "s1", Decider: who, Voter: runs.SubjectKey(d, who), Via: runs.ViaAPI,
			Directory: d, VoterKeys: runs.PersonKeys(d, who),
			Decision: loop.Decision{TurnDigest: "digest-s1", Action: loop.ActionApprove},
			Choices:  []runs.VoteChoice{{CallID: "call-1", Action: loop.ActionApprove}}}
	}
	old, nu := dir("ann@old.example.com"), dir("ann@new.example.com")
	r1, err := e.Store.Decide(ctx, r, vote("ann@old.example.com", old))
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r1.Status)
	r2, err := e.Store.Decide(ctx, r1, vote("ann@new.example.com", nu))
	AssertCode(t, runs.EConflict, err)
	if r2 != nil {
		assert.Equal(t, runs.StatusWaiting, r2.Status, "person:ann alone met a quorum of two: %v", r2.DecidedCallsIn(nu))
	}
}

// testResumeDecided: a run whose votes decide every held call under the
// directory in force, though it waits (two principals voted as one
// person under the directory of the day, and a directory that no longer
// makes them one is in force), is resumed by ResumeDecided with what the
// votes decided; a run they do not decide is EConflict, unchanged.
func testResumeDecided(t *testing.T, e *Env) {
	ctx := t.Context()
	r, _ := e.waitingQuorum(t, 2)
	merged, err := identity.DecodeDirectory([]byte(`{"version": 1, "persons": [{"id": "p", "aliases": ["x@example.com", "y@example.com"]}]}`))
	require.NoError(t, err)
	vote := func(who string, d *identity.Directory) runs.NewDecision {
		return runs.NewDecision{SuspensionID: "s1", Decider: who, Voter: who, Via: runs.ViaAPI, Directory: d,
			Decision: loop.Decision{TurnDigest: "digest-s1", Action: loop.ActionApprove},
			Choices:  []runs.VoteChoice{{CallID: "call-1", Action: loop.ActionApprove}}}
	}
	r, err = e.Store.Decide(ctx, r, vote("x@example.com", nil))
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, vote("y@example.com", merged))
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status, "one person to the merged directory: 1 of 2")

	_, err = e.Store.ResumeDecided(ctx, r, merged)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)

	got, err := e.Store.ResumeDecided(ctx, r, nil)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, got.Status)
	require.NotNil(t, got.Decision)
	assert.Equal(t, loop.ActionApprove, got.Decision.Action)
	assert.Equal(t, "y@example.com", got.DecidedBy, "the last vote that decided the call")
	stored, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, got.Version, stored.Version)
	assert.Equal(t, runs.StatusResuming, stored.Status)
	_, err = e.Store.ResumeDecided(ctx, r, nil)
	AssertCode(t, runs.EConflict, err)
}
