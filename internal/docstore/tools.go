package docstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/loop"
)

// The names of the builtin document tools.
const (
	ToolListDocuments   = "list_documents"
	ToolReadDocument    = "read_document"
	ToolSearchDocuments = "search_documents"
	ToolWriteDocument   = "write_document"
	ToolDeleteDocument  = "delete_document"
)

// limits bound the work of one tool call.
type limits struct {
	listEntries     int // documents shown by list_documents
	searchDocuments int // documents read by one search
	searchBytes     int64
	searchDefault   int // matches shown when the call gives no limit
	searchMax       int // the largest limit a call may ask for
	snippetBytes    int
}

var defaultLimits = limits{
	listEntries:     1000,
	searchDocuments: 500,
	searchBytes:     16 << 20,
	searchDefault:   10,
	searchMax:       50,
	snippetBytes:    160,
}

// Tools returns the five document tools over backend: list_documents,
// read_document and search_documents (reads), write_document and
// delete_document (idempotent writes with a unified-diff preview).
func Tools(backend Backend) []loop.Tool {
	return newToolset(backend, defaultLimits).tools()
}

type toolset struct {
	b   Backend
	lim limits
}

func newToolset(b Backend, lim limits) *toolset { return &toolset{b: b, lim: lim} }

func (s *toolset) tools() []loop.Tool {
	return []loop.Tool{
		&loop.FuncTool{
			Def: loop.Definition{
				Name:        ToolListDocuments,
				Description: "List the documents in the store, optionally only those whose path starts with a prefix (such as \"guide/\"). Shows each path with its size in bytes.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"prefix":{"type":"string","maxLength":512,"description":"Only list documents whose path starts with this string, for example \"guide/\". Omit to list all."}},"additionalProperties":false}`),
				Effect:      loop.EffectRead,
			},
			CallFunc: s.list,
		},
		&loop.FuncTool{
			Def: loop.Definition{
				Name:        ToolReadDocument,
				Description: "Read the full text of one document.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":512,"description":"Relative path of the document, for example \"guide/intro.md\": at most 512 bytes of UTF-8, each folder or file name at most 255 bytes."}},"required":["path"],"additionalProperties":false}`),
				Effect:      loop.EffectRead,
			},
			CallFunc: s.read,
		},
		&loop.FuncTool{
			Def: loop.Definition{
				Name:        ToolSearchDocuments,
				Description: "Search the documents for a text, ignoring case. Returns the matching paths, each with the line number and text of its first matching line.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":256,"description":"Text to look for; matched as a case-insensitive substring of a line."},"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Most matching documents to return (default 10)."}},"required":["query"],"additionalProperties":false}`),
				Effect:      loop.EffectRead,
			},
			CallFunc: s.search,
		},
		&loop.FuncTool{
			Def: loop.Definition{
				Name:        ToolWriteDocument,
				Description: "Create a document or replace its whole text. Needs human approval; the approver sees a diff against the current text.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":512,"description":"Relative path of the document, for example \"guide/intro.md\": at most 512 bytes of UTF-8, each folder or file name at most 255 bytes."},"text":{"type":"string","maxLength":1048576,"description":"The complete new text of the document (at most 1 MB)."}},"required":["path","text"],"additionalProperties":false}`),
				Effect:      loop.EffectWrite,
				Idempotent:  true,
			},
			CallFunc:         s.write,
			BasedPreviewFunc: s.previewWrite,
		},
		&loop.FuncTool{
			Def: loop.Definition{
				Name:        ToolDeleteDocument,
				Description: "Delete a document. Needs human approval; the approver sees the text that would be removed.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":512,"description":"Relative path of the document to delete: at most 512 bytes of UTF-8, each folder or file name at most 255 bytes."}},"required":["path"],"additionalProperties":false}`),
				Effect:      loop.EffectWrite,
				Idempotent:  true,
			},
			CallFunc:         s.delete,
			BasedPreviewFunc: s.previewDelete,
		},
	}
}

type listInput struct {
	Prefix string `json:"prefix"`
}

type pathInput struct {
	Path string `json:"path"`
}

type searchInput struct {
	Query string `json:"query"`
	Limit *int   `json:"limit"`
}

type writeInput struct {
	Path string  `json:"path"`
	Text *string `json:"text"`
}

// decodeInput decodes a call's input strictly; the error is fit for the model.
func decodeInput(input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid input: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("invalid input: trailing data after the JSON object")
	}
	return nil
}

// toolError turns backend errors about the input — the path, the document
// at it — into an error result the model can act on, in words without
// system detail, and passes anything else on as a Go error.
func toolError(p string, err error) (loop.Result, error) {
	switch {
	case errors.Is(err, ErrInvalidPath), errors.Is(err, ErrTooManyEntries):
		return loop.ErrorResult("%v", err), nil
	case errors.Is(err, ErrNotFound):
		return loop.ErrorResult("document %q does not exist", p), nil
	case errors.Is(err, ErrTooLarge):
		return loop.ErrorResult("document %q is larger than %d bytes and cannot be handled by these tools", p, MaxDocumentBytes), nil
	case errors.Is(err, ErrNotText):
		return loop.ErrorResult("document %q is not UTF-8 text (a binary file?) and cannot be shown by these tools", p), nil
	case errors.Is(err, ErrPathConflict):
		return loop.ErrorResult("cannot use %q: a document or folder in the way conflicts with it", p), nil
	case errors.Is(err, ErrOutsideStore):
		return loop.ErrorResult("cannot use %q: it leads outside the document store through a symbolic link", p), nil
	case errors.Is(err, ErrLinkLoop):
		return loop.ErrorResult("cannot use %q: it passes through a loop of symbolic links", p), nil
	case errors.Is(err, ErrNotDocument):
		return loop.ErrorResult("cannot use %q: it is not a readable document (a special file such as a named pipe, or an archived object)", p), nil
	case errors.Is(err, ErrPermission):
		return loop.ErrorResult("cannot use %q: the document store is not permitted to access it", p), nil
	}
	return loop.Result{}, err
}

// beforeEffect is toolError for a failure before a write changed anything:
// a Go error is marked loop.ErrNoEffect, so the run does not end as an
// interrupted write.
func beforeEffect(p string, err error) (loop.Result, error) {
	res, err := toolError(p, err)
	if err != nil {
		return res, fmt.Errorf("%w: %w", loop.ErrNoEffect, err)
	}
	return res, nil
}

// effectError is toolError for a failed Put or Delete: path problems are
// error results (the backend changed nothing), a failure the backend knows
// changed nothing is marked loop.ErrNoEffect, and any other is an effect
// whose outcome is unknown.
func effectError(p string, err error) (loop.Result, error) {
	if errors.Is(err, ErrNotApplied) {
		return beforeEffect(p, err)
	}
	return toolError(p, err)
}

func (s *toolset) list(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	var in listInput
	if err := decodeInput(input, &in); err != nil {
		return loop.ErrorResult("%v", err), nil
	}
	if err := validatePrefix(in.Prefix); err != nil {
		return loop.ErrorResult("%v", err), nil
	}
	docs, more, err := s.b.List(ctx, in.Prefix, s.lim.listEntries)
	if err != nil {
		return toolError(in.Prefix, err)
	}
	if len(docs) == 0 {
		if in.Prefix == "" {
			return loop.Result{Content: "no documents"}, nil
		}
		return loop.Result{Content: fmt.Sprintf("no documents under %q", in.Prefix)}, nil
	}
	var sb strings.Builder
	for _, d := range docs {
		fmt.Fprintf(&sb, "%s (%d bytes)\n", d.Path, d.Size)
	}
	if more {
		fmt.Fprintf(&sb, "… listing stopped after %s; list a narrower prefix to see the rest\n", documents(len(docs)))
	}
	return loop.Result{Content: strings.TrimSuffix(sb.String(), "\n")}, nil
}

func (s *toolset) read(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	var in pathInput
	if err := decodeInput(input, &in); err != nil {
		return loop.ErrorResult("%v", err), nil
	}
	if err := ValidatePath(in.Path); err != nil {
		return loop.ErrorResult("%v", err), nil
	}
	text, _, err := s.b.Get(ctx, in.Path)
	if err != nil {
		return toolError(in.Path, err)
	}
	return loop.Result{Content: text}, nil
}

func (s *toolset) search(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	var in searchInput
	if err := decodeInput(input, &in); err != nil {
		return loop.ErrorResult("%v", err), nil
	}
	if strings.TrimSpace(in.Query) == "" {
		return loop.ErrorResult("invalid input: the query is empty"), nil
	}
	want := s.lim.searchDefault
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > s.lim.searchMax {
			return loop.ErrorResult("invalid input: limit must be between 1 and %d", s.lim.searchMax), nil
		}
		want = *in.Limit
	}
	docs, moreDocs, err := s.b.List(ctx, "", s.lim.searchDocuments)
	if err != nil {
		return toolError("", err)
	}
	query := strings.ToLower(in.Query)
	var (
		hits     []string
		searched int
		scanned  int64
		skipped  int
		stopped  string
	)
	for _, d := range docs {
		if len(hits) == want {
			stopped = fmt.Sprintf("showing the first %d matching; there may be more", want)
			break
		}
		if scanned >= s.lim.searchBytes {
			stopped = fmt.Sprintf("search stopped after reading %d bytes in %s; later documents were not searched", scanned, documents(searched))
			break
		}
		text, _, err := s.b.Get(ctx, d.Path)
		if err != nil && isPathProblem(err) {
			skipped++ // deleted meanwhile, too large, or unreadable
			continue
		}
		if err != nil {
			return loop.Result{}, err
		}
		searched++
		scanned += int64(len(text))
		if line, n, ok := matchLine(text, query); ok {
			hits = append(hits, fmt.Sprintf("%s:%d: %s", d.Path, n, snippet(line, query, s.lim.snippetBytes)))
		}
	}
	if stopped == "" && moreDocs {
		stopped = fmt.Sprintf("search stopped after %s; later documents were not searched", documents(len(docs)))
	}
	var sb strings.Builder
	if len(hits) == 0 {
		fmt.Fprintf(&sb, "no documents match %q (searched %s)", in.Query, documents(searched))
	} else {
		fmt.Fprintf(&sb, "%d matching (searched %s):\n%s", len(hits), documents(searched), strings.Join(hits, "\n"))
	}
	if skipped > 0 {
		fmt.Fprintf(&sb, "\nskipped %s (too large, unreadable, or deleted while searching)", documents(skipped))
	}
	if stopped != "" {
		sb.WriteString("\n" + stopped)
	}
	return loop.Result{Content: sb.String()}, nil
}

// documents says "1 document" or "n documents".
func documents(n int) string {
	if n == 1 {
		return "1 document"
	}
	return fmt.Sprintf("%d documents", n)
}

// matchLine returns the first line of text containing lowerQuery, ignoring
// case, and its 1-based number.
func matchLine(text, lowerQuery string) (string, int, bool) {
	n := 0
	for len(text) > 0 {
		n++
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if strings.Contains(strings.ToLower(line), lowerQuery) {
			return strings.TrimRight(line, "\r"), n, true
		}
	}
	return "", 0, false
}

// snippet shortens a matching line to about max bytes around the match.
func snippet(line, lowerQuery string, max int) string {
	line = strings.TrimSpace(line)
	if len(line) <= max {
		return line
	}
	start := 0
	if lower := strings.ToLower(line); len(lower) == len(line) {
		if i := strings.Index(lower, lowerQuery); i > max/3 {
			start = i - max/3
		}
	}
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	end := min(start+max, len(line))
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end--
	}
	out := line[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(line) {
		out += "…"
	}
	return out
}

// appliedRecord is what an idempotency marker holds: which call applied the
// effect and the result it returned.
type appliedRecord struct {
	Tool        string `json:"tool"`
	InputSHA256 string `json:"input_sha256"`
	Result      string `json:"result"`
}

// once applies a write effect at most once per idempotency key.
//
// Ordering: the effect is applied first and the marker written after it.
// Writing the marker first would be unsafe: a crash between marker and
// effect would make every retry a silent no-op that reports success for an
// effect that never happened. With effect-then-marker, a crash in between
// only means the retry applies the same effect again: putting the same text
// again leaves the same document, and deleting an already deleted document
// leaves it deleted (that retry reports that the document does not exist,
// which is the state the first call produced). Only successful effects are
// marked; an error result changed nothing and is recomputed on a retry.
func (s *toolset) once(ctx context.Context, tool string, input json.RawMessage, apply func() (loop.Result, error)) (loop.Result, error) {
	key := loop.IdempotencyKey(ctx)
	if key == "" {
		return apply()
	}
	sum := sha256.Sum256([]byte(key))
	marker := hex.EncodeToString(sum[:])
	inputHash, err := inputDigest(input)
	if err != nil {
		return loop.ErrorResult("invalid input: %v", err), nil
	}
	raw, ok, err := s.b.Applied(ctx, marker)
	if err != nil {
		return loop.Result{}, fmt.Errorf("%s: read idempotency marker: %w: %w", tool, loop.ErrNoEffect, err)
	}
	if ok {
		var rec appliedRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return loop.Result{}, fmt.Errorf("%s: idempotency marker %s is corrupt: %w: %w", tool, marker, loop.ErrNoEffect, err)
		}
		if rec.Tool != tool || rec.InputSHA256 != inputHash {
			return loop.ErrorResult("this call's idempotency key was already used by a different %s call; nothing was changed", rec.Tool), nil
		}
		return loop.Result{Content: rec.Result, Replayed: true}, nil
	}
	res, err := apply()
	if err != nil || res.IsError {
		return res, err
	}
	rec, err := json.Marshal(appliedRecord{Tool: tool, InputSHA256: inputHash, Result: res.Content})
	if err != nil {
		return loop.Result{}, err
	}
	if err := s.b.MarkApplied(ctx, marker, rec); err != nil {
		return loop.Result{}, fmt.Errorf("%s: record idempotency marker: %w", tool, err)
	}
	return res, nil
}

func inputDigest(input json.RawMessage) (string, error) {
	canon, err := loop.CanonicalJSON(input)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// checkWrite decodes and checks a write_document input; msg is set when the
// input is bad.
func checkWrite(input json.RawMessage) (in writeInput, msg string) {
	if err := decodeInput(input, &in); err != nil {
		return in, err.Error()
	}
	if err := ValidatePath(in.Path); err != nil {
		return in, err.Error()
	}
	if in.Text == nil {
		return in, "invalid input: text is required (use \"\" for an empty document)"
	}
	if len(*in.Text) > MaxDocumentBytes {
		return in, fmt.Sprintf("invalid input: the text is %d bytes long; the limit is %d", len(*in.Text), MaxDocumentBytes)
	}
	return in, ""
}

func checkDelete(input json.RawMessage) (in pathInput, msg string) {
	if err := decodeInput(input, &in); err != nil {
		return in, err.Error()
	}
	if err := ValidatePath(in.Path); err != nil {
		return in, err.Error()
	}
	return in, ""
}

func (s *toolset) write(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	in, msg := checkWrite(input)
	if msg != "" {
		return loop.ErrorResult("%s", msg), nil
	}
	text := *in.Text
	return s.once(ctx, ToolWriteDocument, input, func() (loop.Result, error) {
		old, _, err := s.b.Get(ctx, in.Path)
		opaque := errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNotText) // replaced without comparing
		exists := err == nil || opaque
		if err != nil && !exists && !errors.Is(err, ErrNotFound) {
			return beforeEffect(in.Path, err)
		}
		if err == nil && old == text {
			// Nothing to change, so nothing the approver did not see can be
			// overwritten (this is also the retry of a write that was applied
			// but whose marker was not recorded).
			return loop.Result{Content: fmt.Sprintf("%s already has this text (%d bytes); nothing changed", in.Path, len(text))}, nil
		}
		if res, changed := changedSinceReview(ctx, in.Path, old, err); changed {
			return res, nil
		}
		if err := s.b.Put(ctx, in.Path, text); err != nil {
			return effectError(in.Path, err)
		}
		switch {
		case errors.Is(err, ErrTooLarge):
			return loop.Result{Content: fmt.Sprintf("wrote %s (%d bytes, replacing a document over %d bytes)", in.Path, len(text), MaxDocumentBytes)}, nil
		case opaque:
			return loop.Result{Content: fmt.Sprintf("wrote %s (%d bytes, replacing a document that was not UTF-8 text)", in.Path, len(text))}, nil
		case exists:
			return loop.Result{Content: fmt.Sprintf("wrote %s (%d bytes, replacing %d bytes)", in.Path, len(text), len(old))}, nil
		}
		return loop.Result{Content: fmt.Sprintf("created %s (%d bytes)", in.Path, len(text))}, nil
	})
}

func (s *toolset) delete(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	in, msg := checkDelete(input)
	if msg != "" {
		return loop.ErrorResult("%s", msg), nil
	}
	return s.once(ctx, ToolDeleteDocument, input, func() (loop.Result, error) {
		old, _, err := s.b.Get(ctx, in.Path)
		opaque := errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNotText) // deleted without reading
		if err != nil && !opaque {
			return beforeEffect(in.Path, err)
		}
		if res, changed := changedSinceReview(ctx, in.Path, old, err); changed {
			return res, nil
		}
		if err := s.b.Delete(ctx, in.Path); err != nil {
			return effectError(in.Path, err)
		}
		if opaque {
			return loop.Result{Content: fmt.Sprintf("deleted %s", in.Path)}, nil
		}
		return loop.Result{Content: fmt.Sprintf("deleted %s (%d bytes)", in.Path, len(old))}, nil
	})
}
