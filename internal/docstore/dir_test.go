package docstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func newTestDirBackend(t *testing.T) Backend {
	t.Helper()
	b, err := NewDirBackend(filepath.Join(t.TempDir(), "content"))
	if err != nil {
		t.Fatalf("NewDirBackend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestDirBackend(t *testing.T) {
	testBackend(t, newTestDirBackend)
}

func TestDirBackendStaysInsideItsFolder(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newTestDirBackend(t).(*DirBackend)
	if err := os.Symlink(outside, filepath.Join(b.Dir(), "link")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	ctx := context.Background()
	if text, _, err := b.Get(ctx, "link/secret.txt"); err == nil {
		t.Errorf("Get through a symlink out of the folder = %q, want an error", text)
	}
	if err := b.Put(ctx, "link/planted.txt", "x"); err == nil {
		t.Errorf("Put through a symlink out of the folder succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was planted outside the folder: %v", err)
	}
	docs, _, err := b.List(ctx, "", 100)
	if err != nil || len(docs) != 0 {
		t.Errorf("List = %+v, %v; want nothing (symlinked folders are not followed)", docs, err)
	}
}

func TestDirBackendLayout(t *testing.T) {
	b := newTestDirBackend(t).(*DirBackend)
	ctx := context.Background()
	put(t, b, "a/b/c.md", "deep")
	if data, err := os.ReadFile(filepath.Join(b.Dir(), "a", "b", "c.md")); err != nil || string(data) != "deep" {
		t.Fatalf("file on disk = %q, %v; want \"deep\"", data, err)
	}
	if err := b.Put(ctx, "a/b", "x"); !errors.Is(err, ErrPathConflict) {
		t.Errorf("Put over a folder: error = %v, want ErrPathConflict", err)
	}
	if err := b.Put(ctx, "a/b/c.md/d.md", "x"); !errors.Is(err, ErrPathConflict) {
		t.Errorf("Put below a document: error = %v, want ErrPathConflict", err)
	}
	res := call(t, toolByName(t, b, ToolWriteDocument), "", `{"path":"a/b","text":"x"}`)
	wantResult(t, res, true, `cannot use "a/b": a document or folder in the way conflicts with it`)
	if err := b.Delete(ctx, "a/b"); err != nil {
		t.Errorf("Delete(folder) = %v, want nil", err)
	}
	if _, ok := get(t, b, "a/b/c.md"); !ok {
		t.Errorf("Delete of a folder removed a document in it")
	}
	if err := b.Delete(ctx, "a/b/c.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Dir(), "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty folders left behind after the last document went: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir(), "big.md"), make([]byte, MaxDocumentBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, "big.md"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Get(big) error = %v, want ErrTooLarge", err)
	}
	res = call(t, toolByName(t, b, ToolReadDocument), "", `{"path":"big.md"}`)
	wantResult(t, res, true, `document "big.md" is larger than 1048576 bytes and cannot be handled by these tools`)
	res = call(t, toolByName(t, b, ToolSearchDocuments), "", `{"query":"x"}`)
	wantResult(t, res, false, "no documents match \"x\" (searched 0 documents)\nskipped 1 document (too large, unreadable, or deleted while searching)")
}
