package runs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
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
	// The output goes into one buffer sized for a state that compresses
	// 4:1 (JSON with text does better) and grows from there, and the
	// compressor stops as soon as it passes the limit: a state of
	// incompressible tool input over the limit is refused without
	// compressing the rest of it.
	buf := limitedBuffer{b: make([]byte, 0, min(len(state)/4+1024, MaxStateSize+1))}
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	_, err := zw.Write(state)
	if err == nil {
		err = zw.Close()
	}
	if errors.Is(err, errOverLimit) {
		return StateRef{}, nil, Errorf(ETooLarge,
			"the state is %d bytes as JSON and more than %d compressed, over the %d-byte limit",
			len(state), MaxStateSize, MaxStateSize)
	}
	if err != nil {
		return StateRef{}, nil, fmt.Errorf("gzip state: %w", err)
	}
	sum := sha256.Sum256(state)
	sha := hex.EncodeToString(sum[:])
	ref := StateRef{Key: StateKey(runID, sha), SHA256: sha, Size: int64(len(buf.b))}
	return ref, buf.b, nil
}

// errOverLimit is what limitedBuffer returns once a write would take it
// past MaxStateSize.
var errOverLimit = errors.New("over the state size limit")

// limitedBuffer collects a compressed state and refuses to grow past
// MaxStateSize, so a compressor writing into it stops there.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > MaxStateSize {
		return 0, errOverLimit
	}
	l.b = append(l.b, p...)
	return len(p), nil
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
	// gzip's trailer holds the inflated size (modulo 4 GiB): read into a
	// buffer of that size rather than one grown by doubling. It is only a
	// hint: capped at 16 times the blob (a corrupted trailer costs no more),
	// and a stream that inflates to more still reads whole up to
	// maxStateJSON. The comparison is in uint64, so a large trailer cannot
	// wrap where int is 32 bits.
	var hint int
	if n := len(blob); n >= 4 {
		hint = int(min(uint64(binary.LittleEndian.Uint32(blob[n-4:])), 16*uint64(n), maxStateJSON))
	}
	w := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
	_, err = w.ReadFrom(io.LimitReader(zr, maxStateJSON))
	state := w.Bytes()
	if err != nil {
		return nil, Errorf(EInternal, "state blob %s is corrupted: %v", ref.Key, err)
	}
	sum := sha256.Sum256(state)
	if got := hex.EncodeToString(sum[:]); got != ref.SHA256 {
		return nil, Errorf(EInternal, "state blob %s is corrupted: sha-256 %s, want %s", ref.Key, got, ref.SHA256)
	}
	return state, nil
}
