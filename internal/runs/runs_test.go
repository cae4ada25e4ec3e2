package runs_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestCanTransition(t *testing.T) {
	all := []runs.Status{runs.StatusQueued, runs.StatusRunning, runs.StatusWaiting, runs.StatusResuming,
		runs.StatusCompleted, runs.StatusFailed, runs.StatusCancelled, runs.StatusExpired}
	allowed := map[[2]runs.Status]bool{
		{runs.StatusQueued, runs.StatusRunning}:     true,
		{runs.StatusQueued, runs.StatusCancelled}:   true,
		{runs.StatusQueued, runs.StatusFailed}:      true, // re-dispatched MaxReclaims times: worker_lost
		{runs.StatusRunning, runs.StatusWaiting}:    true,
		{runs.StatusRunning, runs.StatusResuming}:   true, // a checkpoint
		{runs.StatusRunning, runs.StatusCompleted}:  true,
		{runs.StatusRunning, runs.StatusFailed}:     true,
		{runs.StatusRunning, runs.StatusCancelled}:  true,
		{runs.StatusWaiting, runs.StatusResuming}:   true,
		{runs.StatusWaiting, runs.StatusExpired}:    true,
		{runs.StatusWaiting, runs.StatusCancelled}:  true,
		{runs.StatusResuming, runs.StatusRunning}:   true,
		{runs.StatusResuming, runs.StatusCancelled}: true,
		{runs.StatusResuming, runs.StatusFailed}:    true, // likewise
	}
	for _, from := range all {
		assert.True(t, from.Valid(), "%s valid", from)
		for _, to := range all {
			want := allowed[[2]runs.Status{from, to}]
			assert.Equal(t, want, runs.CanTransition(from, to), "%s -> %s", from, to)
			if from.Terminal() {
				assert.False(t, runs.CanTransition(from, to), "terminal %s must not move to %s", from, to)
			}
		}
	}
	assert.False(t, runs.Status("DONE").Valid())
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode string
		wantMsg  string
	}{
		{"nil", nil, "", ""},
		{"plain error is internal", errors.New("boom"), runs.EInternal, "internal error"},
		{"domain error", runs.Errorf(runs.EConflict, "run %s moved", "r1"), runs.EConflict, "run r1 moved"},
		{"wrapped domain error", fmt.Errorf("load: %w", runs.Errorf(runs.EGone, "blob gone")), runs.EGone, "blob gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantCode, runs.ErrorCode(tt.err))
			assert.Equal(t, tt.wantMsg, runs.ErrorMessage(tt.err))
		})
	}
}

//agentgate:megabytes
func TestStateCodec(t *testing.T) {
	state := []byte(`{"schema_version":1,"transcript":[` + strings.Repeat(`{"role":"user","text":"hello"},`, 1000) + `{}]}`)
	ref, blob, err := runs.EncodeBlob("r1", state)
	require.NoError(t, err)
	assert.Equal(t, "runs/r1/state/"+ref.SHA256+".json.gz", ref.Key)
	assert.Equal(t, int64(len(blob)), ref.Size)
	assert.Less(t, len(blob), len(state), "state is compressed")

	got, err := runs.DecodeBlob(ref, blob)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	t.Run("corrupted blob", func(t *testing.T) {
		bad := append([]byte(nil), blob...)
		bad[len(bad)/2] ^= 0xff
		_, err := runs.DecodeBlob(ref, bad)
		assert.Equal(t, runs.EInternal, runs.ErrorCode(err), "got %v", err)
	})
	t.Run("not gzip", func(t *testing.T) {
		_, err := runs.DecodeBlob(ref, []byte("{}"))
		assert.Equal(t, runs.EInternal, runs.ErrorCode(err), "got %v", err)
	})
	t.Run("other content", func(t *testing.T) {
		_, other, err := runs.EncodeBlob("r1", []byte(`{"x":1}`))
		require.NoError(t, err)
		_, err = runs.DecodeBlob(ref, other)
		assert.Equal(t, runs.EInternal, runs.ErrorCode(err), "got %v", err)
	})
	t.Run("trailer claims more than the blob holds", func(t *testing.T) {
		// The inflated size in gzip's trailer only sizes the read buffer:
		// a forged one is caught by gzip's own check.
		bad := append([]byte(nil), blob...)
		binary.LittleEndian.PutUint32(bad[len(bad)-4:], 1<<31)
		_, err := runs.DecodeBlob(ref, bad)
		assert.Equal(t, runs.EInternal, runs.ErrorCode(err), "got %v", err)
	})
	t.Run("larger than the limit as JSON, under it compressed", func(t *testing.T) {
		big := []byte(`{"schema_version":1,"transcript":[` + strings.Repeat(`{"role":"user","text":"hello"},`, 250_000) + `{}]}`)
		require.Greater(t, len(big), runs.MaxStateSize)
		ref, blob, err := runs.EncodeBlob("r1", big)
		require.NoError(t, err)
		assert.Less(t, len(blob), runs.MaxStateSize)
		got, err := runs.DecodeBlob(ref, blob)
		require.NoError(t, err)
		assert.Equal(t, big, got)
	})
	t.Run("empty", func(t *testing.T) {
		_, _, err := runs.EncodeBlob("r1", nil)
		assert.Equal(t, runs.EInvalid, runs.ErrorCode(err), "got %v", err)
	})
	t.Run("oversized", func(t *testing.T) {
		raw := make([]byte, 6<<20)
		_, _ = rand.Read(raw)
		big := []byte(`"` + base64.StdEncoding.EncodeToString(raw) + `"`) // 8 MB of base64, about 6 MB gzip'd
		_, _, err := runs.EncodeBlob("r1", big)
		assert.Equal(t, runs.ETooLarge, runs.ErrorCode(err), "got %v", err)
		assert.Contains(t, runs.ErrorMessage(err), "over the 5242880-byte limit")
	})
}

func TestValidRunID(t *testing.T) {
	for id, want := range map[string]bool{
		"abc": true, "A-b_9": true, "": false, "a/b": false, "a#b": false, strings.Repeat("a", 65): false,
	} {
		assert.Equal(t, want, runs.ValidRunID(id), "ValidRunID(%q)", id)
	}
	assert.True(t, runs.ValidRunID(runs.NewRunID()))
}

// TestNewRunIDIsTimeOrdered: an id is 32 hex digits whose first 12 are the
// unix milliseconds it was made at (so ids made close together sort side by
// side in the embedded store) and whose other 20 are random.
func TestNewRunIDIsTimeOrdered(t *testing.T) {
	seen := map[string]bool{}
	tails := map[string]bool{}
	for range 1000 {
		before := time.Now().UnixMilli()
		id := runs.NewRunID()
		after := time.Now().UnixMilli()
		require.Len(t, id, 32)
		require.True(t, runs.ValidRunID(id))
		raw, err := hex.DecodeString(id)
		require.NoError(t, err, id)
		ms := int64(binary.BigEndian.Uint64(append([]byte{0, 0}, raw[:6]...))) //nolint:gosec // 48 bits
		require.True(t, before <= ms && ms <= after, "id %s says %d, made between %d and %d", id, ms, before, after)
		require.False(t, seen[id], "id %s made twice", id)
		seen[id] = true
		tails[id[12:]] = true
	}
	assert.Len(t, tails, 1000, "the random part repeated")
}

// TestFirstNoticeDue: a suspension's first approval mail is owed, and the
// sweep sends it FirstNoticeGrace after the hold, while the number the
// suspension kept for its notified event is not taken and no reminder went
// out, whatever the notification state says: a quorum check that mailed
// those it asked takes it as sent, and those the hold listed were still
// owed theirs (before, nothing was owed once the state left pending).
func TestFirstNoticeDue(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	owed := func() *runs.Run {
		return &runs.Run{Status: runs.StatusWaiting, Notification: runs.NotificationPending, NoticeSeq: 4, SuspendedAt: at}
	}
	tests := []struct {
		name string
		edit func(r *runs.Run)
		want time.Time
	}{
		{"held, nothing recorded", func(*runs.Run) {}, at.Add(runs.FirstNoticeGrace)},
		{"a quorum check mailed those it asked", func(r *runs.Run) { r.Notification = runs.NotificationSent }, at.Add(runs.FirstNoticeGrace)},
		{"recorded (the number taken)", func(r *runs.Run) { r.Notification, r.NoticeSeq = runs.NotificationSent, 0 }, time.Time{}},
		{"recorded as failed", func(r *runs.Run) { r.Notification, r.NoticeSeq = runs.NotificationFailed, 0 }, time.Time{}},
		{"the reminder was the first mail", func(r *runs.Run) { r.Notification, r.ReminderSent = runs.NotificationSent, true }, time.Time{}},
		{"nobody to mail (no number kept)", func(r *runs.Run) { r.NoticeSeq = 0 }, time.Time{}},
		{"no longer waiting", func(r *runs.Run) { r.Status = runs.StatusResuming }, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := owed()
			tt.edit(r)
			if got := r.FirstNoticeDue(); !got.Equal(tt.want) {
				t.Errorf("FirstNoticeDue() = %v, want %v", got, tt.want)
			}
		})
	}
}
