package docstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"
)

// DirBackend keeps documents as files in a local folder, for embedded mode.
// All access goes through an os.Root, so no path — not even through a
// symbolic link — reaches outside the folder. Markers and temporary files
// live in the hidden ".applied/" subfolder, which listings skip.
type DirBackend struct {
	root *os.Root
	dir  string
	// Bounds of List; tests lower them.
	maxFolderEntries, maxListVisits int
}

var _ Backend = (*DirBackend)(nil)

// NewDirBackend opens (creating it if needed) the folder dir as a document
// store. Call Close when done with it.
func NewDirBackend(dir string) (*DirBackend, error) {
	if dir == "" {
		return nil, fmt.Errorf("docstore: folder name is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // the user's own working folder, as permissive as one they make
		return nil, fmt.Errorf("create document folder %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open document folder %s: %w", dir, err)
	}
	return &DirBackend{root: root, dir: dir, maxFolderEntries: maxFolderEntries, maxListVisits: maxListVisits}, nil
}

// Dir returns the folder the backend keeps its documents in.
func (b *DirBackend) Dir() string { return b.dir }

// Close releases the folder.
func (b *DirBackend) Close() error { return b.root.Close() }

// Get implements Backend. The version is the SHA-256 (hex) of the text.
func (b *DirBackend) Get(ctx context.Context, p string) (string, string, error) {
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	if err := ValidatePath(p); err != nil {
		return "", "", err
	}
	// O_NONBLOCK: opening a named pipe for reading must not wait for a
	// writer; it has no effect on regular files.
	f, err := b.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if err := mapDirError(err, "read "+p); !errors.Is(err, ErrPathConflict) {
			return "", "", err
		}
		return "", "", ErrNotFound // a parent folder is a document
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", p, err)
	}
	switch {
	case st.IsDir():
		return "", "", ErrNotFound // a folder is not a document
	case !st.Mode().IsRegular():
		return "", "", ErrNotDocument
	case st.Size() > MaxDocumentBytes:
		return "", "", ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return "", "", mapDirError(err, "read "+p)
	}
	if len(data) > MaxDocumentBytes {
		return "", "", ErrTooLarge
	}
	if !utf8.Valid(data) {
		return "", "", ErrNotText
	}
	sum := sha256.Sum256(data)
	return string(data), hex.EncodeToString(sum[:]), nil
}

// Put implements Backend. It writes a temporary file and renames it over the
// document, so a reader sees the old text or the new one, never a mix.
func (b *DirBackend) Put(ctx context.Context, p, text string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidatePath(p); err != nil {
		return err
	}
	if dir := path.Dir(p); dir != "." {
		if err := b.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: %w", ErrNotApplied, mapDirError(err, "create folder for "+p))
		}
	}
	if err := b.writeAtomic(p, []byte(text)); err != nil {
		// Until the rename, which happens whole or not at all, the
		// document is untouched (only empty folders may have been made).
		return fmt.Errorf("%w: %w", ErrNotApplied, err)
	}
	return nil
}

func (b *DirBackend) writeAtomic(name string, data []byte) error {
	tmpDir := appliedDir + "/.tmp"
	if err := b.root.MkdirAll(tmpDir, 0o755); err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := tmpDir + "/" + hex.EncodeToString(rnd[:])
	f, err := b.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", name, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = b.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, werr)
	}
	if err := b.root.Rename(tmp, name); err != nil {
		_ = b.root.Remove(tmp)
		return mapDirError(err, "write "+name)
	}
	return nil
}

// Delete implements Backend. It also removes folders the deletion left
// empty, up to the store's folder. Removing a file happens whole or not at
// all, so every failure wraps ErrNotApplied.
func (b *DirBackend) Delete(ctx context.Context, p string) error {
	if err := b.delete(ctx, p); err != nil {
		return fmt.Errorf("%w: %w", ErrNotApplied, err)
	}
	return nil
}

func (b *DirBackend) delete(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidatePath(p); err != nil {
		return err
	}
	st, err := b.root.Lstat(p)
	if err != nil {
		if err := mapDirError(err, "delete "+p); errors.Is(err, ErrNotFound) || errors.Is(err, ErrPathConflict) {
			return nil
		} else {
			return err
		}
	}
	if st.IsDir() {
		return nil // a folder is not a document
	}
	if err := b.root.Remove(p); err != nil {
		if err := mapDirError(err, "delete "+p); errors.Is(err, ErrNotFound) {
			return nil
		} else {
			return err
		}
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if b.root.Remove(dir) != nil { // fails once a folder is not empty
			break
		}
	}
	return nil
}

// Bounds on one listing of a folder tree.
const (
	// maxFolderEntries is the most entries one folder may have for List to
	// read it; a larger folder is ErrTooManyEntries, not a slow walk.
	maxFolderEntries = 100_000
	// maxListVisits is the most entries (documents, folders, anything else)
	// one List call looks at; past it the listing stops as if at its limit.
	maxListVisits = 200_000
)

// List implements Backend. It walks the folders in the byte order of the
// paths below them, so it can stop as soon as it has limit documents. It
// does not follow symbolic links to folders, lists only regular files with
// valid document paths, and stops (more = true) after looking at
// maxListVisits entries. A folder with more than maxFolderEntries entries
// is ErrTooManyEntries.
func (b *DirBackend) List(ctx context.Context, prefix string, limit int) ([]DocumentInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, false, err
	}
	// Walk only the deepest folder the prefix names in full.
	start := "."
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = prefix[:i]
	}
	w := &dirLister{b: b, ctx: ctx, prefix: prefix, limit: limit}
	if err := w.walk(start); err != nil {
		if errors.Is(err, ErrTooManyEntries) || ctx.Err() != nil {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("list documents under %q: %w", prefix, err)
	}
	return w.docs, w.more, nil
}

// ErrTooManyEntries means a folder has more entries than DirBackend lists.
var ErrTooManyEntries = errors.New("too many entries")

type dirLister struct {
	b      *DirBackend
	ctx    context.Context
	prefix string
	limit  int
	visits int
	docs   []DocumentInfo
	more   bool // set when the walk stopped early
}

// walk lists folder dir; it returns nil once the listing is complete or
// stopped early (w.more).
func (w *dirLister) walk(dir string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := w.readFolder(dir)
	if err != nil {
		if errors.Is(err, ErrTooManyEntries) || !isPathProblem(mapDirError(err, "")) {
			return err
		}
		return nil // nothing listable there: gone, a link out, no permission
	}
	for _, e := range entries {
		if w.visits++; w.visits > w.b.maxListVisits {
			w.more = true
			return nil
		}
		name := e.Name()
		if dir != "." {
			name = dir + "/" + name
		}
		switch {
		case e.IsDir():
			sub := name + "/"
			if name == appliedDir || ValidatePath(name) != nil ||
				!(strings.HasPrefix(sub, w.prefix) || strings.HasPrefix(w.prefix, sub)) {
				continue
			}
			if err := w.walk(name); err != nil || w.more {
				return err
			}
		case e.Type().IsRegular():
			if !strings.HasPrefix(name, w.prefix) || ValidatePath(name) != nil {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed while listing
			}
			if w.limit >= 0 && len(w.docs) == w.limit {
				w.more = true
				return nil
			}
			w.docs = append(w.docs, DocumentInfo{Path: name, Size: info.Size()})
		}
	}
	return nil
}

// readFolder reads the entries of folder dir (at most maxFolderEntries),
// sorted so that a depth-first walk visits paths in byte order: a folder
// sorts as its name followed by "/" ("a-c" before "a/b", like S3).
func (w *dirLister) readFolder(dir string) ([]fs.DirEntry, error) {
	f, err := w.b.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []fs.DirEntry
	for {
		batch, err := f.ReadDir(1024)
		entries = append(entries, batch...)
		if len(entries) > w.b.maxFolderEntries {
			name := fmt.Sprintf("the folder %q", dir)
			if dir == "." {
				name = "the top folder"
			}
			return nil, fmt.Errorf("%w: %s has more than %d entries; these tools cannot list it", ErrTooManyEntries, name, w.b.maxFolderEntries)
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := w.ctx.Err(); err != nil {
			return nil, err
		}
	}
	key := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	return entries, nil
}

// Applied implements Backend.
func (b *DirBackend) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !validMarker(marker) {
		return nil, false, fmt.Errorf("docstore: malformed marker %q", marker)
	}
	data, err := b.root.ReadFile(appliedDir + "/" + marker)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read marker %s: %w", marker, err)
	}
	return data, true, nil
}

// MarkApplied implements Backend.
func (b *DirBackend) MarkApplied(ctx context.Context, marker string, record []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validMarker(marker) {
		return fmt.Errorf("docstore: malformed marker %q", marker)
	}
	return b.writeAtomic(appliedDir+"/"+marker, record)
}

// mapDirError turns file-system errors that describe the path rather than
// the system into the Backend's sentinel errors (a name too long, a
// symbolic link out of the folder or in a loop, a permission the store
// lacks on this document); anything else is wrapped with what.
func mapDirError(err error, what string) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("%s: %w", what, ErrPathConflict)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: a folder or file name in the path is too long for the file system", ErrInvalidPath)
	case errors.Is(err, syscall.ELOOP):
		return ErrLinkLoop
	case isRootEscape(err):
		return ErrOutsideStore
	case errors.Is(err, fs.ErrPermission):
		return ErrPermission
	}
	return fmt.Errorf("%s: %w", what, err)
}

// rootEscapeMessage is the text of the error os.Root returns when a path
// or a symbolic link on it leads out of the root. The os package does not
// export that error; TestRootEscapeIsRecognised fails if its text changes.
const rootEscapeMessage = "path escapes from parent"

func isRootEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(syscall.Errno); ok { //nolint:errorlint // walks the chain itself, one level at a time
			return false
		}
		if e.Error() == rootEscapeMessage {
			return true
		}
	}
	return false
}

func validMarker(m string) bool {
	if len(m) != sha256.Size*2 {
		return false
	}
	for _, c := range m {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
