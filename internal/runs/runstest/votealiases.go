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
