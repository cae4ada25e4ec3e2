package runs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
)

// MaxStateSize is the largest compressed state blob a StateStore accepts.
const MaxStateSize = 5 << 20

// maxStateJSON bounds how much a corrupted or hostile gzip stream may
// inflate to on load.
const maxStateJSON = 256 << 20

// gzipWriters reuses compressors: a new flate writer allocates about 1 MB.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// gzipReaders reuses decompressors: a new one allocates its 32 KB window
// and tables for every blob loaded.
var gzipReaders sync.Pool

// RunPrefix returns the key prefix under which a run's blobs live.
func RunPrefix(runID string) string { return "runs/" + runID + "/" }

// StateKey returns the content-addressed key of a state blob.
func StateKey(runID, sha string) string {
	return RunPrefix(runID) + "state/" + sha + ".json.gz"
}

// EncodeBlob gzips a JSON blob of a run (a suspended state, submitted tool
// results) and returns its ref (key, SHA-256 of the JSON, compressed size)
// and the bytes to store. Codes: EInvalid for
// an empty state, ETooLarge for a compressed size above MaxStateSize.
func EncodeBlob(runID string, state []byte) (StateRef, []byte, error) {
	if len(state) == 0 {
		return StateRef{}, nil, Errorf(EInvalid, "suspended state is empty")
	}
	sum := sha256.Sum256(state)
	sha := hex.EncodeToString(sum[:])
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(state); err != nil {
		return StateRef{}, nil, fmt.Errorf("gzip state: %w", err)
	}
	if err := zw.Close(); err != nil {
		return StateRef{}, nil, fmt.Errorf("gzip state: %w", err)
	}
	if buf.Len() > MaxStateSize {
		return StateRef{}, nil, Errorf(ETooLarge,
			"the state is %d bytes compressed (%d as JSON), over the %d-byte limit",
			buf.Len(), len(state), MaxStateSize)
	}
	ref := StateRef{Key: StateKey(runID, sha), SHA256: sha, Size: int64(buf.Len())}
	return ref, buf.Bytes(), nil
}

// DecodeBlob un-gzips a stored blob and verifies it against ref. Codes:
// EInternal when the blob is not gzip or its SHA-256 does not match.
func DecodeBlob(ref StateRef, blob []byte) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(blob))
	} else {
		err = zr.Reset(bytes.NewReader(blob))
	}
	if err != nil {
		return nil, Errorf(EInternal, "state blob %s is corrupted: not gzip", ref.Key)
	}
	defer gzipReaders.Put(zr)
	state, err := io.ReadAll(io.LimitReader(zr, maxStateJSON))
	if err != nil {
		return nil, Errorf(EInternal, "state blob %s is corrupted: %v", ref.Key, err)
	}
	sum := sha256.Sum256(state)
	if got := hex.EncodeToString(sum[:]); got != ref.SHA256 {
		return nil, Errorf(EInternal, "state blob %s is corrupted: sha-256 %s, want %s", ref.Key, got, ref.SHA256)
	}
	return state, nil
}
