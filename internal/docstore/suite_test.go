package docstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// testBackend runs the behaviour every Backend must have, and every tool
// over it, against fresh backends made by newBackend. DirBackend runs it in
// unit tests, S3Backend against moto in the integration tests.
func testBackend(t *testing.T, newBackend func(t *testing.T) Backend) {
	t.Run("backend", func(t *testing.T) { testBackendContract(t, newBackend(t)) })
	t.Run("list_documents", func(t *testing.T) { testListTool(t, newBackend(t)) })
	t.Run("read_document", func(t *testing.T) { testReadTool(t, newBackend(t)) })
	t.Run("search_documents", func(t *testing.T) { testSearchTool(t, newBackend(t)) })
	t.Run("write_document", func(t *testing.T) { testWriteTool(t, newBackend(t)) })
	t.Run("delete_document", func(t *testing.T) { testDeleteTool(t, newBackend(t)) })
	t.Run("bad paths", func(t *testing.T) { testBadPaths(t, newBackend(t)) })
	t.Run("previews", func(t *testing.T) { testPreviews(t, newBackend(t)) })
	t.Run("idempotent writes", func(t *testing.T) { testIdempotentWrites(t, newBackend(t)) })
	t.Run("changed after review", func(t *testing.T) { testChangedAfterReview(t, newBackend(t)) })
	t.Run("binary documents", func(t *testing.T) { testBinaryDocuments(t, newBackend(t)) })
}

// A document that is not UTF-8 (someone copied a binary file into the
// store) is reported, skipped by search, and replaced or deleted without a
// diff; its bytes never reach the transcript or a preview.
func testBinaryDocuments(t *testing.T, b Backend) {
	put(t, b, "bin.md", "PNG\xff\xfe\x00needle")
	put(t, b, "text.md", "needle\n")
	wantResult(t, call(t, toolByName(t, b, ToolReadDocument), "", `{"path":"bin.md"}`), true,
		`document "bin.md" is not UTF-8 text (a binary file?) and cannot be shown by these tools`)
	wantResult(t, call(t, toolByName(t, b, ToolSearchDocuments), "", `{"query":"needle"}`), false,
		"1 matching (searched 1 document):\ntext.md:1: needle\nskipped 1 document (too large, unreadable, or deleted while searching)")
	preview := func(tool, input string) string {
		t.Helper()
		got, err := toolByName(t, b, tool).(loop.Previewer).Preview(context.Background(), json.RawMessage(input))
		if err != nil {
			t.Fatalf("Preview: %v", err)
		}
		return got
	}
	if got, want := preview(ToolWriteDocument, `{"path":"bin.md","text":"hi"}`), "replaces bin.md, whose current content is not UTF-8 text (no diff), with 2 bytes"; got != want {
		t.Errorf("write preview = %q, want %q", got, want)
	}
	if got, want := preview(ToolDeleteDocument, `{"path":"bin.md"}`), "deletes bin.md, whose content is not UTF-8 text (no diff)"; got != want {
		t.Errorf("delete preview = %q, want %q", got, want)
	}
	wantResult(t, call(t, toolByName(t, b, ToolWriteDocument), "", `{"path":"bin.md","text":"hi"}`), false,
		"wrote bin.md (2 bytes, replacing a document that was not UTF-8 text)")
	put(t, b, "bin.md", "\xff")
	wantResult(t, call(t, toolByName(t, b, ToolDeleteDocument), "", `{"path":"bin.md"}`), false, "deleted bin.md")
	if _, ok := get(t, b, "bin.md"); ok {
		t.Errorf("bin.md still there")
	}
}

// countingBackend counts the effects that reach the wrapped backend.
type countingBackend struct {
	Backend
	puts, deletes, marks atomic.Int32
}

func (c *countingBackend) Put(ctx context.Context, p, text string) error {
	c.puts.Add(1)
	return c.Backend.Put(ctx, p, text)
}

func (c *countingBackend) Delete(ctx context.Context, p string) error {
	c.deletes.Add(1)
	return c.Backend.Delete(ctx, p)
}

func (c *countingBackend) MarkApplied(ctx context.Context, marker string, record []byte) error {
	c.marks.Add(1)
	return c.Backend.MarkApplied(ctx, marker, record)
}

func toolByName(t *testing.T, b Backend, name string) loop.Tool {
	t.Helper()
	return toolWithLimits(t, b, defaultLimits, name)
}

func toolWithLimits(t *testing.T, b Backend, lim limits, name string) loop.Tool {
	t.Helper()
	for _, tool := range newToolset(b, lim).tools() {
		if tool.Definition().Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

// call runs a tool with the given idempotency key ("" for none) and fails the
// test on a Go error.
func call(t *testing.T, tool loop.Tool, key, input string) loop.Result {
	t.Helper()
	ctx := context.Background()
	if key != "" {
		ctx = loop.WithIdempotencyKey(ctx, key)
	}
	res, err := tool.Call(ctx, json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s(%s): unexpected Go error: %v", tool.Definition().Name, input, err)
	}
	return res
}

func wantResult(t *testing.T, got loop.Result, wantErr bool, wantContent string) {
	t.Helper()
	if got.IsError != wantErr || got.Content != wantContent {
		t.Errorf("result = {IsError: %v, Content: %q}\nwant     {IsError: %v, Content: %q}", got.IsError, got.Content, wantErr, wantContent)
	}
}

func wantErrorContaining(t *testing.T, got loop.Result, sub string) {
	t.Helper()
	if !got.IsError || !strings.Contains(got.Content, sub) {
		t.Errorf("result = {IsError: %v, Content: %q}, want an error result containing %q", got.IsError, got.Content, sub)
	}
}

func put(t *testing.T, b Backend, p, text string) {
	t.Helper()
	if err := b.Put(context.Background(), p, text); err != nil {
		t.Fatalf("Put(%q): %v", p, err)
	}
}

func get(t *testing.T, b Backend, p string) (string, bool) {
	t.Helper()
	text, _, err := b.Get(context.Background(), p)
	if errors.Is(err, ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("Get(%q): %v", p, err)
	}
	return text, true
}

func jsonInput(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func testBackendContract(t *testing.T, b Backend) {
	ctx := context.Background()
	if _, _, err := b.Get(ctx, "missing.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
	put(t, b, "guide/intro.md", "one\n")
	text, v1, err := b.Get(ctx, "guide/intro.md")
	if err != nil || text != "one\n" || v1 == "" {
		t.Fatalf("Get = %q, %q, %v; want \"one\\n\", a version, nil", text, v1, err)
	}
	put(t, b, "guide/intro.md", "two\n")
	if _, v2, _ := b.Get(ctx, "guide/intro.md"); v2 == v1 {
		t.Errorf("version did not change with the text: %q", v2)
	}
	put(t, b, "guide-old.md", "x")
	put(t, b, "guide/a/b.md", "")
	put(t, b, "z.md", "zz")
	for _, p := range []string{"guide/intro.md", "guide-old.md", "guide/a/b.md", "z.md"} {
		if _, ok := get(t, b, p); !ok {
			t.Errorf("Get(%q): not found after Put", p)
		}
	}
	sum := [32]byte{1}
	marker := fmt.Sprintf("%x", sum)
	if _, ok, err := b.Applied(ctx, marker); ok || err != nil {
		t.Errorf("Applied(unknown) = %v, %v; want false, nil", ok, err)
	}
	if err := b.MarkApplied(ctx, marker, []byte(`{"result":"r"}`)); err != nil {
		t.Fatalf("MarkApplied: %v", err)
	}
	if rec, ok, err := b.Applied(ctx, marker); !ok || err != nil || string(rec) != `{"result":"r"}` {
		t.Errorf("Applied = %q, %v, %v; want the record, true, nil", rec, ok, err)
	}
	if err := b.MarkApplied(ctx, "../../etc/passwd", nil); err == nil {
		t.Errorf("MarkApplied(bad marker) succeeded, want an error")
	}

	tests := []struct {
		name   string
		prefix string
		limit  int
		want   string
		more   bool
	}{
		{"all in byte order, no markers", "", 100, "guide-old.md guide/a/b.md guide/intro.md z.md", false},
		{"folder prefix", "guide/", 100, "guide/a/b.md guide/intro.md", false},
		{"partial segment", "guide", 100, "guide-old.md guide/a/b.md guide/intro.md", false},
		{"deep prefix", "guide/a/", 100, "guide/a/b.md", false},
		{"no match", "nothing/", 100, "", false},
		{"limit", "", 2, "guide-old.md guide/a/b.md", true},
		{"limit exact", "guide/", 2, "guide/a/b.md guide/intro.md", false},
		{"marker folder", ".applied/", 100, "", false},
	}
	for _, tt := range tests {
		t.Run("list "+tt.name, func(t *testing.T) {
			docs, more, err := b.List(ctx, tt.prefix, tt.limit)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var paths []string
			for _, d := range docs {
				paths = append(paths, d.Path)
			}
			if got := strings.Join(paths, " "); got != tt.want || more != tt.more {
				t.Errorf("List(%q, %d) = %q, more %v; want %q, more %v", tt.prefix, tt.limit, got, more, tt.want, tt.more)
			}
		})
	}
	docs, _, _ := b.List(ctx, "z", 10)
	if len(docs) != 1 || docs[0].Size != 2 {
		t.Errorf("List(z) = %+v, want one document of 2 bytes", docs)
	}

	if err := b.Delete(ctx, "z.md"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok := get(t, b, "z.md"); ok {
		t.Errorf("z.md still there after Delete")
	}
	if err := b.Delete(ctx, "z.md"); err != nil {
		t.Errorf("Delete(missing) = %v, want nil", err)
	}
	for _, p := range []string{"../x", "/etc/passwd", ".applied/" + marker, "a//b", ""} {
		if err := b.Put(ctx, p, "x"); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Put(%q) error = %v, want ErrInvalidPath", p, err)
		}
		if _, _, err := b.Get(ctx, p); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Get(%q) error = %v, want ErrInvalidPath", p, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.Get(cancelled, "guide/intro.md"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: error = %v, want context.Canceled", err)
	}
}

func testListTool(t *testing.T, b Backend) {
	list := toolByName(t, b, ToolListDocuments)
	wantResult(t, call(t, list, "", `{}`), false, "no documents")
	put(t, b, "a.md", "aaa")
	put(t, b, "docs/b.md", "b")
	put(t, b, "docs/c.md", "")
	tests := []struct {
		name    string
		input   string
		wantErr bool
		want    string
	}{
		{"all", `{}`, false, "a.md (3 bytes)\ndocs/b.md (1 bytes)\ndocs/c.md (0 bytes)"},
		{"empty input", ``, false, "a.md (3 bytes)\ndocs/b.md (1 bytes)\ndocs/c.md (0 bytes)"},
		{"prefix", `{"prefix":"docs/"}`, false, "docs/b.md (1 bytes)\ndocs/c.md (0 bytes)"},
		{"no match", `{"prefix":"nope/"}`, false, `no documents under "nope/"`},
		{"traversal", `{"prefix":"../"}`, true, `invalid path: prefix "../" contains ".."`},
		{"absolute", `{"prefix":"/docs"}`, true, `invalid path: prefix "/docs" is absolute; use a relative prefix such as "guide/"`},
		{"unknown field", `{"path":"a"}`, true, `invalid input: json: unknown field "path"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantResult(t, call(t, list, "", tt.input), tt.wantErr, tt.want)
		})
	}
	lim := defaultLimits
	lim.listEntries = 2
	wantResult(t, call(t, toolWithLimits(t, b, lim, ToolListDocuments), "", `{}`), false,
		"a.md (3 bytes)\ndocs/b.md (1 bytes)\n… listing stopped after 2 documents; list a narrower prefix to see the rest")
}

func testReadTool(t *testing.T, b Backend) {
	read := toolByName(t, b, ToolReadDocument)
	put(t, b, "guide/intro.md", "# Intro\nWelcome.\n")
	put(t, b, "empty.md", "")
	tests := []struct {
		name    string
		input   string
		wantErr bool
		want    string
	}{
		{"document", `{"path":"guide/intro.md"}`, false, "# Intro\nWelcome.\n"},
		{"empty document", `{"path":"empty.md"}`, false, ""},
		{"missing", `{"path":"guide/none.md"}`, true, `document "guide/none.md" does not exist`},
		{"folder is not a document", `{"path":"guide"}`, true, `document "guide" does not exist`},
		{"below a document", `{"path":"empty.md/x"}`, true, `document "empty.md/x" does not exist`},
		{"no path", `{}`, true, "invalid path: the path is empty"},
		{"not JSON", `{"path":`, true, "invalid input: unexpected EOF"},
		{"wrong type", `{"path":3}`, true, "invalid input: json: cannot unmarshal number into Go struct field pathInput.path of type string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantResult(t, call(t, read, "", tt.input), tt.wantErr, tt.want)
		})
	}
}

func testSearchTool(t *testing.T, b Backend) {
	search := toolByName(t, b, ToolSearchDocuments)
	put(t, b, "a.md", "first line\nThe Quick brown fox\nquick again\n")
	put(t, b, "b/c.md", "nothing here\n")
	put(t, b, "b/d.md", "QUICK start\n")
	put(t, b, "long.md", strings.Repeat("x", 300)+" quick "+strings.Repeat("y", 300)+"\n")
	tests := []struct {
		name    string
		input   string
		wantErr bool
		want    string
	}{
		{"case-insensitive, first matching line", `{"query":"quick"}`, false,
			"3 matching (searched 4 documents):\na.md:2: The Quick brown fox\nb/d.md:1: QUICK start\nlong.md:1: …" +
				strings.Repeat("x", 52) + " quick " + strings.Repeat("y", 101) + "…"},
		{"limit", `{"query":"QUICK","limit":1}`, false,
			"1 matching (searched 1 document):\na.md:2: The Quick brown fox\nshowing the first 1 matching; there may be more"},
		{"no match", `{"query":"zebra"}`, false, `no documents match "zebra" (searched 4 documents)`},
		{"blank query", `{"query":"  "}`, true, "invalid input: the query is empty"},
		{"limit out of range", `{"query":"a","limit":0}`, true, "invalid input: limit must be between 1 and 50"},
		{"unknown field", `{"query":"a","prefix":"b"}`, true, `invalid input: json: unknown field "prefix"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantResult(t, call(t, search, "", tt.input), tt.wantErr, tt.want)
		})
	}
	t.Run("bounded by documents", func(t *testing.T) {
		lim := defaultLimits
		lim.searchDocuments = 2
		got := call(t, toolWithLimits(t, b, lim, ToolSearchDocuments), "", `{"query":"quick"}`)
		wantResult(t, got, false, "1 matching (searched 2 documents):\na.md:2: The Quick brown fox\n"+
			"search stopped after 2 documents; later documents were not searched")
	})
	t.Run("bounded by bytes", func(t *testing.T) {
		lim := defaultLimits
		lim.searchBytes = 10
		got := call(t, toolWithLimits(t, b, lim, ToolSearchDocuments), "", `{"query":"quick"}`)
		wantResult(t, got, false, "1 matching (searched 1 document):\na.md:2: The Quick brown fox\n"+
			"search stopped after reading 43 bytes in 1 document; later documents were not searched")
	})
}

func testWriteTool(t *testing.T, b Backend) {
	write := toolByName(t, b, ToolWriteDocument)
	wantResult(t, call(t, write, "", `{"path":"guide/new.md","text":"hello\n"}`), false, "created guide/new.md (6 bytes)")
	wantResult(t, call(t, write, "", `{"path":"guide/new.md","text":"hello world\n"}`), false, "wrote guide/new.md (12 bytes, replacing 6 bytes)")
	wantResult(t, call(t, write, "", `{"path":"guide/new.md","text":"hello world\n"}`), false, "guide/new.md already has this text (12 bytes); nothing changed")
	wantResult(t, call(t, write, "", `{"path":"empty.md","text":""}`), false, "created empty.md (0 bytes)")
	if text, _ := get(t, b, "guide/new.md"); text != "hello world\n" {
		t.Errorf("stored text = %q, want %q", text, "hello world\n")
	}
	wantResult(t, call(t, write, "", `{"path":"x.md"}`), true, `invalid input: text is required (use "" for an empty document)`)
	big := jsonInput(t, map[string]any{"path": "big.md", "text": strings.Repeat("a", MaxDocumentBytes+1)})
	wantResult(t, call(t, write, "", big), true, "invalid input: the text is 1048577 bytes long; the limit is 1048576")
	if _, ok := get(t, b, "big.md"); ok {
		t.Errorf("big.md was written")
	}
	exact := jsonInput(t, map[string]any{"path": "exact.md", "text": strings.Repeat("a", MaxDocumentBytes)})
	wantResult(t, call(t, write, "", exact), false, "created exact.md (1048576 bytes)")
}

func testDeleteTool(t *testing.T, b Backend) {
	del := toolByName(t, b, ToolDeleteDocument)
	put(t, b, "docs/old.md", "bye\n")
	put(t, b, "docs/keep.md", "stay\n")
	wantResult(t, call(t, del, "", `{"path":"docs/old.md"}`), false, "deleted docs/old.md (4 bytes)")
	if _, ok := get(t, b, "docs/old.md"); ok {
		t.Errorf("docs/old.md still exists")
	}
	if _, ok := get(t, b, "docs/keep.md"); !ok {
		t.Errorf("docs/keep.md was deleted too")
	}
	wantResult(t, call(t, del, "", `{"path":"docs/old.md"}`), true, `document "docs/old.md" does not exist`)
	wantResult(t, call(t, del, "", `{"path":"docs"}`), true, `document "docs" does not exist`)
}

func testBadPaths(t *testing.T, b Backend) {
	put(t, b, "ok.md", "ok")
	tests := []struct {
		name string
		path string
		want string
	}{
		{"traversal", "../secret", `contains ".."`},
		{"traversal inside", "docs/../../secret", `contains ".."`},
		{"bare dot dot", "..", `contains ".."`},
		{"absolute", "/etc/passwd", "is absolute"},
		{"too long", strings.Repeat("a", MaxPathBytes+1), "the path is 513 bytes long; the limit is 512"},
		{"empty", "", "the path is empty"},
		{"double slash", "docs//a.md", "is not clean"},
		{"dot segment", "./a.md", "is not clean"},
		{"trailing slash", "docs/", "is not clean"},
		{"backslash", `..\secret`, "contains a backslash"},
		{"control character", "a\nb.md", "contains a control character"},
		{"reserved folder", ".applied/x", "reserved folder"},
		{"reserved name", ".applied", "reserved folder"},
		// Issue #10 item 3: a 256–512-byte segment passed and then failed
		// with "file name too long".
		{"segment of 256 bytes", strings.Repeat("s", 256), "is 256 bytes long; each folder or file name may have at most 255 bytes"},
		{"segment of 512 bytes", strings.Repeat("s", 512), "is 512 bytes long; each folder or file name may have at most 255 bytes"},
		{"long folder segment", "docs/" + strings.Repeat("f", 300) + "/a.md", "is 300 bytes long"},
		{"multi-byte segment over 255 bytes", strings.Repeat("é", 128), "is 256 bytes long"},
		{"multi-byte path over 512 bytes", strings.Repeat("é", 256) + "x", "the path is 513 bytes long"},
		{"NUL", "a\x00b.md", "contains a control character"},
		{"NEL", "a\u0085b.md", "contains a control character"},
		{"line separator", "a\u2028b.md", "invisible or special character U+2028"},
		{"paragraph separator", "a\u2029b.md", "invisible or special character U+2029"},
		{"zero-width space", "a\u200bb.md", "invisible or special character U+200B"},
		{"right-to-left override", "report\u202Edm.exe", "invisible or special character U+202E"},
		{"byte order mark", "\ufeffa.md", "invisible or special character U+FEFF"},
		{"private use", "a\ue000.md", "invisible or special character U+E000"},
		{"replacement character", "a\ufffd.md", "invisible or special character U+FFFD"},
		{"not NFC", "cafe\u0301.md", "not in Unicode normalization form C"},
		{"leading space", " a.md", "starts or ends with white space"},
		{"trailing space", "a.md ", "starts or ends with white space"},
		{"folder with trailing space", "docs /a.md", "starts or ends with white space"},
		{"ideographic space", "docs/\u3000a.md", "starts or ends with white space"},
		{"backslash traversal", `docs\..\..\x`, "contains a backslash"},
	}
	tools := []string{ToolReadDocument, ToolWriteDocument, ToolDeleteDocument}
	for _, tt := range tests {
		for _, name := range tools {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				c := &countingBackend{Backend: b}
				input := jsonInput(t, map[string]any{"path": tt.path, "text": "x"})
				if name != ToolWriteDocument {
					input = jsonInput(t, map[string]any{"path": tt.path})
				}
				got := call(t, toolByName(t, c, name), "run/-/call", input)
				wantErrorContaining(t, got, "invalid path: ")
				wantErrorContaining(t, got, tt.want)
				if n := c.puts.Load() + c.deletes.Load() + c.marks.Load(); n != 0 {
					t.Errorf("%d backend writes for a bad path, want 0", n)
				}
			})
		}
	}
	// The longest paths and segments are documents like any other.
	for _, p := range []string{
		strings.Repeat("a", MaxSegmentBytes),
		strings.Repeat("a", MaxSegmentBytes) + "/" + strings.Repeat("b", MaxSegmentBytes-1) + "/c",
		strings.Repeat("é", 127) + "/" + strings.Repeat("ü", 127) + "/12",
		"café/naïve résumé.md",
		"日本語/ドキュメント.md",
	} {
		if len(p) > MaxPathBytes {
			t.Fatalf("test path %q is %d bytes", p, len(p))
		}
		write := toolByName(t, b, ToolWriteDocument)
		wantResult(t, call(t, write, "", jsonInput(t, map[string]any{"path": p, "text": "x"})), false, fmt.Sprintf("created %s (1 bytes)", p))
		if text, ok := get(t, b, p); !ok || text != "x" {
			t.Errorf("Get(%d-byte path) = %q, %v; want \"x\", true", len(p), text, ok)
		}
		if res := call(t, toolByName(t, b, ToolListDocuments), "", jsonInput(t, map[string]any{"prefix": p})); !strings.Contains(res.Content, p+" (1 bytes)") {
			t.Errorf("list of %d-byte path = %q", len(p), res.Content)
		}
		wantResult(t, call(t, toolByName(t, b, ToolDeleteDocument), "", jsonInput(t, map[string]any{"path": p})), false, fmt.Sprintf("deleted %s (1 bytes)", p))
	}
}

func testPreviews(t *testing.T, b Backend) {
	put(t, b, "guide/intro.md", "# Intro\nline two\nline three\nline four\n")
	put(t, b, "empty.md", "")
	var long strings.Builder
	for i := range 300 {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	tests := []struct {
		name  string
		tool  string
		input string
		want  string
	}{
		{"replace", ToolWriteDocument, `{"path":"guide/intro.md","text":"# Intro\nline 2\nline three\nline four\nline five\n"}`,
			"--- a/guide/intro.md\n+++ b/guide/intro.md\n@@ -1,4 +1,5 @@\n # Intro\n-line two\n+line 2\n line three\n line four\n+line five\n"},
		{"new document", ToolWriteDocument, `{"path":"guide/new.md","text":"hello\nworld\n"}`,
			"--- /dev/null\n+++ b/guide/new.md\n@@ -0,0 +1,2 @@\n+hello\n+world\n"},
		{"new empty document", ToolWriteDocument, `{"path":"blank.md","text":""}`, "creates blank.md as an empty document"},
		{"no change", ToolWriteDocument, `{"path":"empty.md","text":""}`, "no change: empty.md already has this text"},
		{"bad path", ToolWriteDocument, `{"path":"../x","text":"a"}`, `this call will fail: invalid path: "../x" contains ".."; paths may not leave the document store`},
		{"long: every line is shown", ToolWriteDocument, jsonInput(t, map[string]any{"path": "long.md", "text": long.String()}),
			"--- /dev/null\n+++ b/long.md\n@@ -0,0 +1,300 @@\n" + plusLines(300)},
		{"delete", ToolDeleteDocument, `{"path":"guide/intro.md"}`,
			"--- a/guide/intro.md\n+++ /dev/null\n@@ -1,4 +0,0 @@\n-# Intro\n-line two\n-line three\n-line four\n"},
		{"delete empty", ToolDeleteDocument, `{"path":"empty.md"}`, "deletes empty.md, which is empty"},
		{"delete missing", ToolDeleteDocument, `{"path":"none.md"}`, `this call will fail: document "none.md" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := toolByName(t, b, tt.tool)
			got, err := tool.(loop.Previewer).Preview(context.Background(), json.RawMessage(tt.input))
			if err != nil {
				t.Fatalf("Preview: %v", err)
			}
			if got != tt.want {
				t.Errorf("Preview =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	if text, _ := get(t, b, "guide/intro.md"); text != "# Intro\nline two\nline three\nline four\n" {
		t.Errorf("a preview changed the document: %q", text)
	}
	if _, ok := get(t, b, "guide/new.md"); ok {
		t.Errorf("a preview created guide/new.md")
	}
}

func plusLines(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "+line %d\n", i)
	}
	return sb.String()
}

func testIdempotentWrites(t *testing.T, b Backend) {
	c := &countingBackend{Backend: b}
	write := toolByName(t, c, ToolWriteDocument)
	del := toolByName(t, c, ToolDeleteDocument)

	first := call(t, write, "run1/-/call1", `{"path":"doc.md","text":"v1\n"}`)
	wantResult(t, first, false, "created doc.md (3 bytes)")
	// Someone changes the document between the two calls: the repeat must
	// not write v1 again.
	put(t, b, "doc.md", "changed\n")
	again := call(t, write, "run1/-/call1", `{"text":"v1\n","path":"doc.md"}`)
	wantResult(t, again, false, first.Content)
	if first.Replayed || !again.Replayed {
		t.Errorf("Replayed = %v for the first call and %v for the repeat, want false and true (the audit trail tells them apart)", first.Replayed, again.Replayed)
	}
	if text, _ := get(t, b, "doc.md"); text != "changed\n" {
		t.Errorf("document = %q after the repeated write, want %q", text, "changed\n")
	}
	if n := c.puts.Load(); n != 1 {
		t.Errorf("backend puts = %d, want 1", n)
	}

	// Another key is another call.
	wantResult(t, call(t, write, "run1/-/call2", `{"path":"doc.md","text":"v1\n"}`), false, "wrote doc.md (3 bytes, replacing 8 bytes)")

	// The same key with another input is refused, not silently ignored.
	wantResult(t, call(t, write, "run1/-/call1", `{"path":"doc.md","text":"v2\n"}`), true,
		"this call's idempotency key was already used by a different write_document call; nothing was changed")
	wantResult(t, call(t, del, "run1/-/call1", `{"path":"doc.md"}`), true,
		"this call's idempotency key was already used by a different write_document call; nothing was changed")

	// Delete: the repeat returns the first result although the document is gone.
	firstDel := call(t, del, "run1/s1/call3", `{"path":"doc.md"}`)
	wantResult(t, firstDel, false, "deleted doc.md (3 bytes)")
	put(t, b, "doc.md", "recreated\n")
	wantResult(t, call(t, del, "run1/s1/call3", `{"path":"doc.md"}`), false, firstDel.Content)
	if text, _ := get(t, b, "doc.md"); text != "recreated\n" {
		t.Errorf("document = %q after the repeated delete, want %q", text, "recreated\n")
	}
	if n := c.deletes.Load(); n != 1 {
		t.Errorf("backend deletes = %d, want 1", n)
	}

	// Error results are not remembered: after fixing the cause, the same
	// key applies.
	wantResult(t, call(t, del, "run1/s1/call4", `{"path":"later.md"}`), true, `document "later.md" does not exist`)
	put(t, b, "later.md", "now\n")
	wantResult(t, call(t, del, "run1/s1/call4", `{"path":"later.md"}`), false, "deleted later.md (4 bytes)")

	// Without a key (outside the loop) every call applies.
	before := c.puts.Load()
	call(t, write, "", `{"path":"free.md","text":"a"}`)
	call(t, write, "", `{"path":"free.md","text":"b"}`)
	if n := c.puts.Load() - before; n != 2 {
		t.Errorf("backend puts without a key = %d, want 2", n)
	}

	// Markers never show up as documents.
	res := call(t, toolByName(t, b, ToolListDocuments), "", `{}`)
	if strings.Contains(res.Content, appliedDir) {
		t.Errorf("list shows markers:\n%s", res.Content)
	}
}
