package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// FuzzDecodeState: a stored state is either refused or decodes to a state
// whose encoding is a fixed point (encode, decode, encode gives the same
// bytes and the same turn digest), and resuming it runs only what it holds:
// each executed call is one of its pending calls, at most once, and a state
// whose calls do not match its digest runs nothing.
func FuzzDecodeState(f *testing.F) {
	for _, name := range []string{"state_v1.json", "state_v2.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"schema_version":3}`))
	f.Add([]byte(`{"schema_version":2,"pending_calls":[{"id":"a","name":"write_doc","input":{"path":"x","path":"y","text":""}}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := loop.DecodeState(raw)
		if err != nil {
			return
		}
		if s.SchemaVersion != 1 && s.SchemaVersion != loop.SchemaVersion {
			t.Fatalf("accepted schema_version %d", s.SchemaVersion)
		}
		enc, err := s.Encode()
		if err != nil {
			// A decoded state that cannot be written back would be lost at
			// the next checkpoint.
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		s2, err := loop.DecodeState(enc)
		if err != nil {
			t.Fatalf("an encoded state does not decode: %v\n%s", err, enc)
		}
		enc2, err := s2.Encode()
		if err != nil || string(enc2) != string(enc) {
			t.Fatalf("encoding is not a fixed point (%v):\n%s\n%s", err, enc, enc2)
		}
		d1, err1 := s.ExpectedDigest()
		d2, err2 := s2.ExpectedDigest()
		if d1 != d2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("the turn digest changed over a round trip: %q (%v), then %q (%v)", d1, err1, d2, err2)
		}

		log := &execLog{}
		r := &loop.Runner{Model: scriptModel(asst(say("done"))), Tools: testTools(t, log, nil)}
		_, rerr := r.Resume(context.Background(), s, loop.Decision{TurnDigest: s.TurnDigest, Action: loop.ActionApprove})
		ran := log.list()
		if err1 != nil || d1 != s.TurnDigest {
			if rerr == nil || len(ran) > 0 {
				t.Fatalf("a state whose calls do not match its digest resumed (err %v) and ran %v", rerr, ran)
			}
			return
		}
		var held []string
		for _, c := range s.PendingCalls {
			held = append(held, c.Name+"("+compact(c.Input)+")")
		}
		for _, call := range ran {
			i := slices.Index(held, call)
			if i < 0 {
				t.Fatalf("resume ran %s, which is not a pending call of the state (%v)", call, held)
			}
			held = slices.Delete(held, i, i+1)
		}
	})
}
