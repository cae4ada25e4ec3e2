//go:build unix

package docstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// faultyFolder makes a document folder holding the things a model's path
// can run into on a real file system (issue #10 item 3): symbolic links out
// of the folder and in loops, a named pipe, names no document path has.
func faultyFolder(t *testing.T) (*DirBackend, string) {
	t.Helper()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newTestDirBackend(t).(*DirBackend)
	dir := b.Dir()
	put(t, b, "real.md", "real\n")
	put(t, b, "ok.md", "ok\n")
	links := map[string]string{
		"out":         outside,                              // a folder out of the store
		"secret.md":   filepath.Join(outside, "secret.txt"), // a document out of the store
		"rel.md":      "../" + filepath.Base(outside) + "/secret.txt",
		"etc.md":      "/etc/passwd",
		"loop.md":     "loop.md",
		"ping":        "pong",
		"pong":        "ping",
		"inside.md":   "real.md", // stays inside: allowed
		"dangling.md": "nowhere.md",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.md"), 0o644); err != nil {
		t.Skipf("named pipes unavailable: %v", err)
	}
	for _, name := range []string{"bad\xffname.md", "cafe\u0301.md", "zw\u200bsp.md"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("hidden"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b, outside
}

func TestDirBackendFaultsAreToolResults(t *testing.T) {
	const (
		escape = "it leads outside the document store through a symbolic link"
		loops  = "it passes through a loop of symbolic links"
		pipe   = "it is not a readable document"
	)
	tests := []struct {
		path string
		want string // error result text after `cannot use "<path>": `; "" = works
	}{
		{"out/secret.txt", escape},
		{"out/new.md", escape},
		{"out/deep/new.md", escape},
		{"secret.md", escape},
		{"rel.md", escape},
		{"etc.md", escape},
		{"loop.md", loops},
		{"ping/x.md", loops},
		{"pipe.md", pipe},
	}
	for _, tt := range tests {
		for _, tool := range []string{ToolReadDocument, ToolWriteDocument, ToolDeleteDocument} {
			t.Run(tool+" "+tt.path, func(t *testing.T) {
				b, outside := faultyFolder(t)
				c := &countingBackend{Backend: b}
				input := jsonInput(t, map[string]any{"path": tt.path})
				if tool == ToolWriteDocument {
					input = jsonInput(t, map[string]any{"path": tt.path, "text": "planted"})
				}
				want := fmt.Sprintf("cannot use %q: %s", tt.path, tt.want)
				got := call(t, toolByName(t, c, tool), "run/-/call-1", input)
				if tt.want == pipe {
					wantErrorContaining(t, got, want)
				} else {
					wantResult(t, got, true, want)
				}
				if n := c.puts.Load() + c.deletes.Load() + c.marks.Load(); n != 0 {
					t.Errorf("%d backend writes, want 0: nothing may start", n)
				}
				if p, ok := toolByName(t, b, tool).(loop.Previewer); ok && tool != ToolReadDocument {
					preview, err := p.Preview(context.Background(), json.RawMessage(input))
					if err != nil || !strings.HasPrefix(preview, "this call will fail: "+want[:20]) {
						t.Errorf("Preview = %q, %v; want \"this call will fail: %s…\"", preview, err, want)
					}
					if strings.Contains(preview, "openat") || strings.Contains(preview, b.Dir()) {
						t.Errorf("Preview shows system detail: %q", preview)
					}
				}
				if strings.Contains(got.Content, "openat") || strings.Contains(got.Content, b.Dir()) || strings.Contains(got.Content, outside) {
					t.Errorf("result shows system detail: %q", got.Content)
				}
				entries, _ := os.ReadDir(outside)
				if len(entries) != 1 {
					t.Errorf("the folder outside the store has %d entries, want 1 (nothing planted)", len(entries))
				}
			})
		}
	}

	t.Run("links that stay inside work", func(t *testing.T) {
		b, _ := faultyFolder(t)
		wantResult(t, call(t, toolByName(t, b, ToolReadDocument), "", `{"path":"inside.md"}`), false, "real\n")
		wantResult(t, call(t, toolByName(t, b, ToolReadDocument), "", `{"path":"dangling.md"}`), true, `document "dangling.md" does not exist`)
	})

	t.Run("list and search skip what they cannot read", func(t *testing.T) {
		b, _ := faultyFolder(t)
		wantResult(t, call(t, toolByName(t, b, ToolListDocuments), "", `{}`), false, "ok.md (3 bytes)\nreal.md (5 bytes)")
		for _, prefix := range []string{"out/", "ping/", "loop.md", "pipe"} {
			got := call(t, toolByName(t, b, ToolListDocuments), "", jsonInput(t, map[string]any{"prefix": prefix}))
			wantResult(t, got, false, fmt.Sprintf("no documents under %q", prefix))
		}
		got := call(t, toolByName(t, b, ToolSearchDocuments), "", `{"query":"e"}`)
		wantResult(t, got, false, "1 matching (searched 2 documents):\nreal.md:1: real")
	})
}

// A document that vanishes or turns into something else between the
// listing and the read is skipped by search, not a failure.
func TestSearchSkipsDocumentsItCannotRead(t *testing.T) {
	b := newTestDirBackend(t).(*DirBackend)
	put(t, b, "a.md", "match\n")
	put(t, b, "b.md", "match\n")
	flaky := &faultBackend{Backend: b, getErr: map[string]error{"a.md": ErrOutsideStore}}
	got := call(t, toolByName(t, flaky, ToolSearchDocuments), "", `{"query":"match"}`)
	wantResult(t, got, false, "1 matching (searched 1 document):\nb.md:1: match\nskipped 1 document (too large, unreadable, or deleted while searching)")
}

func TestDirBackendPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode; mapDirError's table covers EACCES")
	}
	b := newTestDirBackend(t).(*DirBackend)
	put(t, b, "locked.md", "x")
	if err := os.Chmod(filepath.Join(b.Dir(), "locked.md"), 0); err != nil {
		t.Fatal(err)
	}
	wantResult(t, call(t, toolByName(t, b, ToolReadDocument), "", `{"path":"locked.md"}`), true,
		`cannot use "locked.md": the document store is not permitted to access it`)
}

func TestMapDirError(t *testing.T) {
	pe := func(err error) error { return &fs.PathError{Op: "openat", Path: "x", Err: err} }
	tests := []struct {
		err  error
		want error // nil: passed on as an infrastructure failure
	}{
		{pe(syscall.ENOENT), ErrNotFound},
		{pe(syscall.ENOTDIR), ErrPathConflict},
		{pe(syscall.EISDIR), ErrPathConflict},
		{pe(syscall.EEXIST), ErrPathConflict},
		{pe(syscall.ENOTEMPTY), ErrPathConflict},
		{pe(syscall.ENAMETOOLONG), ErrInvalidPath},
		{pe(syscall.ELOOP), ErrLinkLoop},
		{pe(syscall.EACCES), ErrPermission},
		{pe(syscall.EPERM), ErrPermission},
		{pe(errors.New(rootEscapeMessage)), ErrOutsideStore},
		{&os.LinkError{Op: "renameat", Old: "a", New: "b", Err: errors.New(rootEscapeMessage)}, ErrOutsideStore},
		{pe(syscall.EIO), nil},
		{pe(syscall.ENOSPC), nil},
		{pe(syscall.EROFS), nil},
		{pe(syscall.EMFILE), nil},
		{context.Canceled, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			got := mapDirError(tt.err, "read x")
			if tt.want == nil {
				if isPathProblem(got) || !errors.Is(got, tt.err) {
					t.Errorf("mapDirError(%v) = %v, want the error passed on", tt.err, got)
				}
				return
			}
			if !errors.Is(got, tt.want) {
				t.Errorf("mapDirError(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if strings.Contains(got.Error(), "openat") && !errors.Is(tt.want, context.Canceled) {
				t.Errorf("mapDirError(%v) = %q keeps the system error's text", tt.err, got)
			}
		})
	}
}

// TestRootEscapeIsRecognised pins the text of os.Root's unexported escape
// error that isRootEscape relies on.
func TestRootEscapeIsRecognised(t *testing.T) {
	b, _ := faultyFolder(t)
	for _, p := range []string{"out/secret.txt", "secret.md", "etc.md"} {
		_, err := b.root.Open(p)
		if !isRootEscape(err) {
			t.Errorf("os.Root.Open(%q) = %v; isRootEscape does not recognise it (did Go change %q?)", p, err, rootEscapeMessage)
		}
	}
	if _, err := b.root.Open("missing"); isRootEscape(err) {
		t.Errorf("isRootEscape(%v) = true for a missing file", err)
	}
}

func TestDirBackendListsInByteOrderAndStopsEarly(t *testing.T) {
	b := newTestDirBackend(t).(*DirBackend)
	names := []string{"a/b", "a-c", "a.md", "a b.md", "a/b.md/x", "ab/c", "a0", "b", "a/a/a", "A", "é.md", "z/" + strings.Repeat("y", 255)}
	for _, n := range names {
		if strings.HasSuffix(n, "/b.md/x") {
			continue // "a/b.md" vs "a/b.md/x": keep one
		}
		put(t, b, n, "x")
	}
	docs, more, err := b.List(context.Background(), "", -1)
	if err != nil || more {
		t.Fatalf("List = %v, more %v", err, more)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Path)
	}
	want := append([]string(nil), got...)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(names)-1 {
		t.Errorf("List order = %q\nwant byte order %q (%d documents)", got, want, len(names)-1)
	}
	for limit := 0; limit <= len(want); limit++ {
		docs, more, err := b.List(context.Background(), "", limit)
		if err != nil || len(docs) != limit || more != (limit < len(want)) {
			t.Errorf("List(limit %d) = %d documents, more %v, %v", limit, len(docs), more, err)
		}
		for i, d := range docs {
			if d.Path != want[i] {
				t.Errorf("List(limit %d)[%d] = %q, want %q", limit, i, d.Path, want[i])
			}
		}
	}
	// Prefixes that stop in the middle of a segment or a folder.
	for _, prefix := range []string{"a", "a/", "a/a", "a-", "a b", "z/y", "é"} {
		docs, _, err := b.List(context.Background(), prefix, -1)
		if err != nil {
			t.Fatal(err)
		}
		var got, want2 []string
		for _, d := range docs {
			got = append(got, d.Path)
		}
		for _, p := range want {
			if strings.HasPrefix(p, prefix) {
				want2 = append(want2, p)
			}
		}
		if strings.Join(got, "|") != strings.Join(want2, "|") {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want2)
		}
	}
}

func TestDirBackendBoundsHugeFolders(t *testing.T) {
	b := newTestDirBackend(t).(*DirBackend)
	for i := range 30 {
		put(t, b, fmt.Sprintf("big/%02d.md", i), "needle")
	}
	put(t, b, "small/a.md", "x")
	b.maxFolderEntries = 20
	res := call(t, toolByName(t, b, ToolListDocuments), "", `{"prefix":"big/"}`)
	wantResult(t, res, true, `too many entries: the folder "big" has more than 20 entries; these tools cannot list it`)
	res = call(t, toolByName(t, b, ToolSearchDocuments), "", `{"query":"needle"}`)
	wantResult(t, res, true, `too many entries: the folder "big" has more than 20 entries; these tools cannot list it`)
	wantResult(t, call(t, toolByName(t, b, ToolListDocuments), "", `{"prefix":"small/"}`), false, "small/a.md (1 bytes)")
	wantResult(t, call(t, toolByName(t, b, ToolReadDocument), "", `{"path":"big/07.md"}`), false, "needle")

	b.maxFolderEntries = 100
	b.maxListVisits = 10
	docs, more, err := b.List(context.Background(), "", -1)
	if err != nil || !more || len(docs) >= 10 {
		t.Errorf("List with a visit budget of 10 = %d documents, more %v, %v; want fewer than 10, more", len(docs), more, err)
	}
}
