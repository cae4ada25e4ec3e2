package docstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// review computes a write tool's preview as the loop does at suspension and
// returns the preview and its base.
func review(t *testing.T, tool loop.Tool, input string) (preview, base string) {
	t.Helper()
	bp, ok := tool.(loop.BasedPreviewer)
	if !ok {
		t.Fatalf("%s is not a loop.BasedPreviewer", tool.Definition().Name)
	}
	preview, base, err := bp.PreviewWithBase(context.Background(), json.RawMessage(input))
	if err != nil {
		t.Fatalf("PreviewWithBase(%s): %v", input, err)
	}
	return preview, base
}

// callReviewed runs an approved call as the loop does: with its idempotency
// key and the base of the preview the approver reviewed.
func callReviewed(t *testing.T, tool loop.Tool, key, base, input string) loop.Result {
	t.Helper()
	ctx := loop.WithPreviewBase(loop.WithIdempotencyKey(context.Background(), key), base)
	res, err := tool.Call(ctx, json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s(%s): unexpected Go error: %v", tool.Definition().Name, input, err)
	}
	return res
}

func wantRefusedAsChanged(t *testing.T, got loop.Result, p string) {
	t.Helper()
	want := `document "` + p + `" changed after the approver reviewed this call; nothing was changed`
	if !got.IsError || !got.BaseChanged || !strings.Contains(got.Content, want) {
		t.Errorf("result = {IsError: %v, BaseChanged: %v, Content: %q}, want a BaseChanged error result containing %q", got.IsError, got.BaseChanged, got.Content, want)
	}
}

func wantDocument(t *testing.T, b Backend, p, want string, wantExists bool) {
	t.Helper()
	text, ok := get(t, b, p)
	if ok != wantExists || text != want {
		t.Errorf("document %s = %q (exists %v), want %q (exists %v)", p, text, ok, want, wantExists)
	}
}

// testChangedAfterReview: an approved write or delete acts only on the
// document its preview was computed from.
func testChangedAfterReview(t *testing.T, b Backend) {
	c := &countingBackend{Backend: b}
	write := toolByName(t, c, ToolWriteDocument)
	del := toolByName(t, c, ToolDeleteDocument)

	t.Run("write, unchanged: written", func(t *testing.T) {
		put(t, b, "a.md", "old\n")
		_, base := review(t, write, `{"path":"a.md","text":"new\n"}`)
		wantResult(t, callReviewed(t, write, "r/s/a1", base, `{"path":"a.md","text":"new\n"}`), false, "wrote a.md (4 bytes, replacing 4 bytes)")
		wantDocument(t, b, "a.md", "new\n", true)
	})
	t.Run("write, 'no change' reviewed, changed since: refused", func(t *testing.T) {
		put(t, b, "b.md", "same\n")
		preview, base := review(t, write, `{"path":"b.md","text":"same\n"}`)
		if preview != "no change: b.md already has this text" {
			t.Fatalf("preview = %q", preview)
		}
		put(t, b, "b.md", "someone else's change\n")
		puts := c.puts.Load()
		wantRefusedAsChanged(t, callReviewed(t, write, "r/s/b1", base, `{"path":"b.md","text":"same\n"}`), "b.md")
		wantDocument(t, b, "b.md", "someone else's change\n", true)
		if n := c.puts.Load() - puts; n != 0 {
			t.Errorf("backend puts = %d, want 0", n)
		}
		// Refusals are not remembered: the key holds no marker.
		if _, ok, err := b.Applied(context.Background(), markerOf("r/s/b1")); err != nil || ok {
			t.Errorf("marker of the refused call: ok %v, err %v; want none", ok, err)
		}
	})
	t.Run("write, diff reviewed, changed since: refused", func(t *testing.T) {
		put(t, b, "c.md", "v1\n")
		_, base := review(t, write, `{"path":"c.md","text":"v2\n"}`)
		put(t, b, "c.md", "v1 edited by someone\n")
		wantRefusedAsChanged(t, callReviewed(t, write, "r/s/c1", base, `{"path":"c.md","text":"v2\n"}`), "c.md")
		wantDocument(t, b, "c.md", "v1 edited by someone\n", true)
	})
	t.Run("write, absent when reviewed, created since: refused", func(t *testing.T) {
		preview, base := review(t, write, `{"path":"d.md","text":"mine\n"}`)
		if !strings.Contains(preview, "/dev/null") {
			t.Fatalf("preview = %q, want a diff from /dev/null", preview)
		}
		put(t, b, "d.md", "theirs\n")
		wantRefusedAsChanged(t, callReviewed(t, write, "r/s/d1", base, `{"path":"d.md","text":"mine\n"}`), "d.md")
		wantDocument(t, b, "d.md", "theirs\n", true)
	})
	t.Run("write, deleted since: refused", func(t *testing.T) {
		put(t, b, "e.md", "v1\n")
		_, base := review(t, write, `{"path":"e.md","text":"v2\n"}`)
		if err := b.Delete(context.Background(), "e.md"); err != nil {
			t.Fatal(err)
		}
		wantRefusedAsChanged(t, callReviewed(t, write, "r/s/e1", base, `{"path":"e.md","text":"v2\n"}`), "e.md")
		wantDocument(t, b, "e.md", "", false)
	})
	t.Run("write, changed to the new text since: nothing to do", func(t *testing.T) {
		put(t, b, "f.md", "v1\n")
		_, base := review(t, write, `{"path":"f.md","text":"v2\n"}`)
		put(t, b, "f.md", "v2\n")
		wantResult(t, callReviewed(t, write, "r/s/f1", base, `{"path":"f.md","text":"v2\n"}`), false, "f.md already has this text (3 bytes); nothing changed")
	})
	t.Run("edited write to the reviewed path: still checked", func(t *testing.T) {
		put(t, b, "g.md", "v1\n")
		_, base := review(t, write, `{"path":"g.md","text":"v2\n"}`)
		put(t, b, "g.md", "v1 edited\n")
		wantRefusedAsChanged(t, callReviewed(t, write, "r/s/g1", base, `{"path":"g.md","text":"v3 by the approver\n"}`), "g.md")
		wantDocument(t, b, "g.md", "v1 edited\n", true)
	})
	t.Run("delete, unchanged: deleted", func(t *testing.T) {
		put(t, b, "h.md", "bye\n")
		_, base := review(t, del, `{"path":"h.md"}`)
		wantResult(t, callReviewed(t, del, "r/s/h1", base, `{"path":"h.md"}`), false, "deleted h.md (4 bytes)")
		wantDocument(t, b, "h.md", "", false)
	})
	t.Run("delete, changed since: refused", func(t *testing.T) {
		put(t, b, "i.md", "reviewed\n")
		_, base := review(t, del, `{"path":"i.md"}`)
		put(t, b, "i.md", "rewritten since\n")
		deletes := c.deletes.Load()
		wantRefusedAsChanged(t, callReviewed(t, del, "r/s/i1", base, `{"path":"i.md"}`), "i.md")
		wantDocument(t, b, "i.md", "rewritten since\n", true)
		if n := c.deletes.Load() - deletes; n != 0 {
			t.Errorf("backend deletes = %d, want 0", n)
		}
	})
	t.Run("no base (no approval, or a state from before): as before", func(t *testing.T) {
		put(t, b, "j.md", "v1\n")
		put(t, b, "j.md", "changed\n")
		wantResult(t, call(t, write, "r/s/j1", `{"path":"j.md","text":"v2\n"}`), false, "wrote j.md (3 bytes, replacing 8 bytes)")
		wantResult(t, call(t, del, "r/s/j2", `{"path":"j.md"}`), false, "deleted j.md (3 bytes)")
	})
	t.Run("retry of an applied write: its recorded result", func(t *testing.T) {
		put(t, b, "k.md", "v1\n")
		_, base := review(t, write, `{"path":"k.md","text":"v2\n"}`)
		first := callReviewed(t, write, "r/s/k1", base, `{"path":"k.md","text":"v2\n"}`)
		wantResult(t, first, false, "wrote k.md (3 bytes, replacing 3 bytes)")
		// The document now differs from the base (it has the new text), and
		// then someone changes it again: the retry answers from the marker.
		wantResult(t, callReviewed(t, write, "r/s/k1", base, `{"path":"k.md","text":"v2\n"}`), false, first.Content)
		put(t, b, "k.md", "later\n")
		wantResult(t, callReviewed(t, write, "r/s/k1", base, `{"path":"k.md","text":"v2\n"}`), false, first.Content)
		wantDocument(t, b, "k.md", "later\n", true)
	})
	t.Run("retry of an applied delete: its recorded result", func(t *testing.T) {
		put(t, b, "l.md", "v1\n")
		_, base := review(t, del, `{"path":"l.md"}`)
		first := callReviewed(t, del, "r/s/l1", base, `{"path":"l.md"}`)
		wantResult(t, first, false, "deleted l.md (3 bytes)")
		wantResult(t, callReviewed(t, del, "r/s/l1", base, `{"path":"l.md"}`), false, first.Content)
	})
	t.Run("a base that cannot be read: refused", func(t *testing.T) {
		put(t, b, "m.md", "v1\n")
		res := callReviewed(t, write, "r/s/m1", "not a base", `{"path":"m.md","text":"v2\n"}`)
		if !res.IsError || !res.BaseChanged {
			t.Errorf("result = %+v, want a BaseChanged error result", res)
		}
		wantDocument(t, b, "m.md", "v1\n", true)
	})
}

// TestChangedAfterReviewOpaque covers the documents the tools cannot digest
// (too large, not text) on the directory backend.
func TestChangedAfterReviewOpaque(t *testing.T) {
	b := newTestDirBackend(t)
	write := toolByName(t, b, ToolWriteDocument)
	big := strings.Repeat("x", MaxDocumentBytes+1)
	putRaw := func(p, text string) {
		t.Helper()
		if err := b.(*DirBackend).root.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Opaque when reviewed and still opaque: the approver saw no text, so
	// the write replaces it (as before).
	putRaw("big.md", big)
	_, base := review(t, write, `{"path":"big.md","text":"small\n"}`)
	putRaw("big.md", big+"y")
	wantResult(t, callReviewed(t, write, "r/s/o1", base, `{"path":"big.md","text":"small\n"}`), false,
		"wrote big.md (6 bytes, replacing a document over 1048576 bytes)")

	// Opaque when reviewed, text since: refused.
	putRaw("bin.md", "\xff\xfe")
	_, base = review(t, write, `{"path":"bin.md","text":"text\n"}`)
	put(t, b, "bin.md", "now text\n")
	wantRefusedAsChanged(t, callReviewed(t, write, "r/s/o2", base, `{"path":"bin.md","text":"text\n"}`), "bin.md")
	wantDocument(t, b, "bin.md", "now text\n", true)
}

// TestChangedAfterReviewOtherPath: an approver who edits a call's path saw
// no preview of the new path; the base does not apply to it.
func TestChangedAfterReviewOtherPath(t *testing.T) {
	b := newTestDirBackend(t)
	write := toolByName(t, b, ToolWriteDocument)
	put(t, b, "a.md", "v1\n")
	_, base := review(t, write, `{"path":"a.md","text":"v2\n"}`)
	put(t, b, "a.md", "changed\n")
	wantResult(t, callReviewed(t, write, "r/s/p1", base, `{"path":"other.md","text":"v2\n"}`), false, "created other.md (3 bytes)")
	wantDocument(t, b, "a.md", "changed\n", true)
}
