package dynamo

import (
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// newRunItem returns r as rows were written before rowItem (runItem), for
// the tests that read such rows.
func newRunItem(r *runs.Run, shards int) (runItem, error) {
	it := runItem{
		key:              key{PK: runPK(r.ID), SK: runSK},
		ID:               r.ID,
		Status:           string(r.Status),
		Reason:           string(r.Reason),
		Version:          r.Version,
		CreatedAt:        toMS(r.CreatedAt),
		UpdatedAt:        toMS(r.UpdatedAt),
		Counters:         counters(r.Counters),
		Initiator:        r.Initiator,
		Approvers:        r.Approvers,
		FourEyes:         r.FourEyes,
		Purpose:          r.Purpose,
		Metadata:         r.Metadata,
		Request:          string(r.Request),
		SuspensionID:     r.SuspensionID,
		TurnDigest:       r.TurnDigest,
		SuspendedAt:      toMS(r.SuspendedAt),
		InboxKeys:        r.InboxKeys,
		StateKey:         r.State.Key,
		StateSHA256:      r.State.SHA256,
		StateSize:        r.State.Size,
		LeaseOwner:       r.LeaseOwner,
		LeaseUntil:       toMS(r.LeaseUntil),
		PendingEffect:    r.PendingEffect,
		PendingIdem:      r.PendingIdempotent,
		WroteSinceClaim:  r.WroteSinceClaim,
		Reclaims:         r.Reclaims,
		CheckpointKey:    r.Checkpoint.Key,
		CheckpointSHA256: r.Checkpoint.SHA256,
		CheckpointSize:   r.Checkpoint.Size,
		ApprovalDeadline: toMS(r.ApprovalDeadline),
		RemindAt:         toMS(r.RemindAt),
		ReminderSent:     r.ReminderSent,
		Notification:     string(r.Notification),
		DecidedBy:        r.DecidedBy,
		DecidedVia:       r.DecidedVia,
		DecidedAt:        toMS(r.DecidedAt),
		Output:           string(r.Output),
		RetainUntil:      toMS(r.RetainUntil),
		WriteID:          r.WriteID,
		LastSeq:          r.LastSeq,
		TokenHashes:      r.TokenHashes,
		ToolExecutors:    r.ToolExecutors,
	}
	if r.HandOver != nil {
		b, err := loop.MarshalJSON(r.HandOver)
		if err != nil {
			return runItem{}, fmt.Errorf("encode hand-over: %w", err)
		}
		it.HandOver = string(b)
	}
	if len(r.PendingCalls) > 0 {
		b, err := json.Marshal(r.PendingCalls)
		if err != nil {
			return runItem{}, fmt.Errorf("encode pending calls: %w", err)
		}
		it.PendingCalls = string(b)
	}
	if r.Webhook != nil {
		b, err := json.Marshal(r.Webhook)
		if err != nil {
			return runItem{}, fmt.Errorf("encode webhook: %w", err)
		}
		it.Webhook = string(b)
	}
	it.VotesNeeded = r.VotesNeeded
	if len(r.Votes) > 0 {
		b, err := json.Marshal(r.Votes)
		if err != nil {
			return runItem{}, fmt.Errorf("encode votes: %w", err)
		}
		it.Votes = string(b)
	}
	if len(r.Outbox) > 0 {
		b, err := json.Marshal(r.Outbox)
		if err != nil {
			return runItem{}, fmt.Errorf("encode outbox: %w", err)
		}
		it.Outbox = string(b)
	}
	if r.Decision != nil {
		b, err := loop.MarshalJSON(r.Decision)
		if err != nil {
			return runItem{}, fmt.Errorf("encode decision: %w", err)
		}
		it.Decision = string(b)
	}
	if !r.DueAt.IsZero() {
		it.DuePK = duePK(shardOf(r.ID, shards))
		it.DueAt = toMS(r.DueAt)
	}
	if r.Status.Terminal() && !r.RetainUntil.IsZero() {
		it.ExpiresAt = r.RetainUntil.Add(ttlGrace).Unix()
	}
	return it, nil
}
