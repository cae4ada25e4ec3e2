package runs

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
)

// A write's WriteID is 32 hex digits. For a row that waits for a worker
// (QUEUED or RESUMING), the only rows a job carries as its snapshot
// (service.NewJob), the first 8 are random and the other 24 are the first
// 12 bytes of a SHA-256 digest of those 8 and the row's JSON without its
// WriteID; for the others, all 32 are random. The random part keeps two
// writes of the same content (two equal decisions at once) apart: a
// writer that finds its own WriteID stored takes the write for its own.
//
// ClaimSnapshot claims only from a snapshot whose WriteID digests its
// content, and the claim's write is conditional on the stored row's
// WriteID: so a snapshot whose content was changed (its approvers, its
// decision, its request) is refused whatever WriteID it carries — the
// stored row's no longer digests the content, and one that does is not
// the stored row's. Without this, anyone who can invoke a worker and knows
// a stored row's WriteID (it is in the job, and in a failed job's copy in
// the dead-letter queue) could have a worker write a decision nobody made.
//
// The digest rules out a changed row, not a made-up one that is never
// stored: a worker given a consistent made-up snapshot runs until its
// first write (model calls, reads) and then fails its condition; it
// writes nothing and executes no write (a write needs its fence, a write).

// ErrSnapshotAltered is ClaimSnapshot's answer (EInvalid) to a snapshot
// whose WriteID does not digest its content: a job edited after its
// dispatch, or a row of a version before the digests.
var ErrSnapshotAltered = Errorf(EInvalid, "the snapshot is not the row its write committed: its content does not match its write id")

// SealWriteID gives r the WriteID of a write that commits it as it is:
// call it after every other change of the row. Store's writes do; tests
// use it to make a consistent snapshot that is not the stored row.
func SealWriteID(r *Run) {
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	if r.Status == StatusQueued || r.Status == StatusResuming {
		if d := contentDigest(r, hex.EncodeToString(nonce[:])); d != "" {
			r.WriteID = d
			return
		}
	}
	r.WriteID = newWriteID()
}

// contentDigest is the WriteID of r's content under nonce (8 hex digits),
// or "" if r does not encode (a stored row always does).
func contentDigest(r *Run, nonce string) string {
	c := *r
	c.WriteID = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte("agentgate run row v1\n" + nonce))
	h.Write(b)
	return nonce + hex.EncodeToString(h.Sum(nil)[:12])
}

// writtenAsIs reports whether r's WriteID digests its content: r is, byte
// for byte, a row some write committed (or one made up whole).
func (r *Run) writtenAsIs() bool {
	if len(r.WriteID) != 32 {
		return false
	}
	want := contentDigest(r, r.WriteID[:8])
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(r.WriteID)) == 1
}

// newWriteID returns a random id for one write (32 hex digits, all random).
func newWriteID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
