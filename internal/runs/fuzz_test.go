package runs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// FuzzStateBlob: a stored state blob, intact or damaged in any way (bytes
// changed, cut short, extended, or replaced by anything), either decodes to
// exactly the state that was stored or is refused as corrupted (EInternal);
// it never decodes to other bytes, and never panics.
func FuzzStateBlob(f *testing.F) {
	state, err := os.ReadFile(filepath.Join("..", "loop", "testdata", "state_v2.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(state, uint16(0), []byte(nil), false)
	f.Add(state, uint16(10), []byte{0xff}, false)
	f.Add(state, uint16(30), []byte("x"), true)
	f.Add([]byte(`{"schema_version":2}`), uint16(0), []byte("junk"), true)
	f.Fuzz(func(t *testing.T, state []byte, at uint16, patch []byte, cut bool) {
		ref, blob, err := runs.EncodeBlob("run-1", state)
		if err != nil {
			if len(state) == 0 && runs.ErrorCode(err) == runs.EInvalid {
				return
			}
			t.Fatalf("EncodeBlob: %v", err)
		}
		if ref.Size != int64(len(blob)) || ref.Key != runs.StateKey("run-1", ref.SHA256) {
			t.Fatalf("ref %+v does not describe the %d-byte blob", ref, len(blob))
		}
		damaged := bytes.Clone(blob)
		if i := int(at) % (len(damaged) + 1); cut {
			damaged = append(damaged[:i], patch...)
		} else {
			for j, b := range patch {
				if i+j < len(damaged) {
					damaged[i+j] ^= b
				} else {
					damaged = append(damaged, b)
				}
			}
		}
		got, err := runs.DecodeBlob(ref, damaged)
		switch {
		case err != nil && runs.ErrorCode(err) != runs.EInternal:
			t.Fatalf("a damaged blob is refused with code %s, want %s: %v", runs.ErrorCode(err), runs.EInternal, err)
		case err != nil && bytes.Equal(damaged, blob):
			t.Fatalf("the intact blob is refused: %v", err)
		case err == nil && !bytes.Equal(got, state):
			t.Fatalf("the blob decodes to %d other bytes, not the %d stored", len(got), len(state))
		}
	})
}
