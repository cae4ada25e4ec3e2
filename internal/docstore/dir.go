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
// symbolic link — reaches outside the folder. Temporary files live in the
// hidden ".applied/" subfolder, which listings skip; so do the idempotency
// markers, one file each, unless a MarkerStore keeps them (WithMarkerStore).
type DirBackend struct {
	root *os.Root
	dir  string
	// markers keeps the idempotency markers; nil: files in appliedDir.
	markers MarkerStore
	// fileMarkers is set when markers is set and appliedDir held marker
	// files at open (written before the store was configured): Applied
	// then looks for a file when the store has no record.
	fileMarkers bool
	// Bounds of List; tests lower them.
	maxFolderEntries, maxListVisits int
}

var _ Backend = (*DirBackend)(nil)

// MarkerStore keeps the idempotency markers of a DirBackend in place of
// files (the embedded database does, so a marker is a key in its next
// group commit instead of a new file). Markers are lowercase hex SHA-256
// strings, checked by DirBackend before they reach the store. Both methods
// return the context's error when it is cancelled.
type MarkerStore interface {
	// Applied returns the record stored under marker, and false when there
	// is none.
	Applied(ctx context.Context, marker string) (record []byte, ok bool, err error)
	// MarkApplied stores record under marker, replacing any record already
	// there. It returns once the record is durable (committed to disk).
	MarkApplied(ctx context.Context, marker string, record []byte) error
}

// DirOption configures NewDirBackend.
type DirOption func(*DirBackend)

// WithMarkerStore keeps the backend's idempotency markers in m instead of
// files under ".applied/". Marker files a folder already holds (from runs
// started before) are still found: when ".applied/" holds any at open,
// Applied reads the file for a marker m does not have.
//
// Crash safety is the same as with marker files: the tools write a marker
// only after the effect (once in tools.go), and with a marker store Put
// fsyncs the document's folder and those above it after the rename, and
// Delete the folder it removed from, so the effect is on disk before
// MarkApplied is called, and MarkApplied returns only once m has
// committed the record. (With marker files, the
// marker file's fsync came after the effect on the same file system, and
// on a journalling file system such as ext4 it commits the effect's
// rename too; the embedded database's fdatasync of its own file need not,
// hence the folder fsync.)
func WithMarkerStore(m MarkerStore) DirOption {
	return func(b *DirBackend) { b.markers = m }
}

// NewDirBackend opens (creating it if needed) the folder dir as a document
// store. Call Close when done with it.
func NewDirBackend(dir string, opts ...DirOption) (*DirBackend, error) {
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
	b := &DirBackend{root: root, dir: dir, maxFolderEntries: maxFolderEntries, maxListVisits: maxListVisits}
	for _, opt := range opts {
		opt(b)
	}
	if b.markers != nil {
		if b.fileMarkers, err = b.holdsMarkerFiles(); err != nil {
			_ = root.Close()
			return nil, fmt.Errorf("open document folder %s: look for marker files: %w", dir, err)
		}
	}
	return b, nil
}

// holdsMarkerFiles reports whether appliedDir holds at least one marker
// file. It reads the folder's names only as far as the first marker.
func (b *DirBackend) holdsMarkerFiles() (bool, error) {
	f, err := b.root.Open(appliedDir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if validMarker(name) { // not ".tmp", not a stray file
				return true, nil
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
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
	dir := path.Dir(p)
	if dir != "." {
		if err := b.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: %w", ErrNotApplied, mapDirError(err, "create folder for "+p))
		}
	}
	if err := b.writeAtomic(p, []byte(text)); err != nil {
		// Until the rename, which happens whole or not at all, the
		// document is untouched (only empty folders may have been made).
		return fmt.Errorf("%w: %w", ErrNotApplied, err)
	}
	if b.markers != nil {
		// The marker goes to another file (WithMarkerStore): make the
		// rename durable first, and the entries of the folders above it,
		// which this Put, an earlier one that failed after MkdirAll, or
		// a concurrent one may have just made (an unchanged folder's
		// fsync costs next to nothing). The document is in place, so a
		// failure here is an unknown outcome, not ErrNotApplied.
		if err := b.syncFolders(dir, true); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// syncFolders fsyncs folder dir, so that the entries just renamed into or
// removed from it are on disk; with all set, also every folder above it up
// to the store's folder (their entries for folders just made). A folder
// that does not exist (anymore), or a document where a folder would be,
// is skipped for the folder above it.
func (b *DirBackend) syncFolders(dir string, all bool) error {
	synced := false
	for {
		f, err := b.root.Open(dir)
		if err == nil {
			err = f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("sync folder %s: %w", dir, err)
			}
			synced = true
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("sync folder %s: %w", dir, err)
		}
		if dir == "." || (synced && !all) {
			return nil
		}
		dir = path.Dir(dir)
	}
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
	// The document is gone; a failure to make that durable is an unknown
	// outcome, not ErrNotApplied.
	return b.syncRemoval(p)
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

// syncRemoval makes the removal of document p durable before a marker in
// a MarkerStore can say it happened: it fsyncs p's folder or, when the
// deletion removed that folder too, the nearest one above it that is left.
// It does so even when there was nothing to remove: an earlier call may
// have removed the document without the removal reaching the disk yet.
// Without a marker store it does nothing, as before.
func (b *DirBackend) syncRemoval(p string) error {
	if b.markers == nil {
		return nil
	}
	if err := b.syncFolders(path.Dir(p), false); err != nil {
		return fmt.Errorf("delete %s: %w", p, err)
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

// Applied implements Backend. With a MarkerStore it asks the store, and
// reads a marker file only when the store has no record and the folder
// held marker files at open.
func (b *DirBackend) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !validMarker(marker) {
		return nil, false, fmt.Errorf("docstore: malformed marker %q", marker)
	}
	if b.markers != nil {
		rec, ok, err := b.markers.Applied(ctx, marker)
		if err != nil {
			return nil, false, fmt.Errorf("read marker %s: %w", marker, err)
		}
		if ok || !b.fileMarkers {
			return rec, ok, nil
		}
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

// MarkApplied implements Backend: a record in the MarkerStore, committed
// before it returns, or else a file in ".applied/" written like a document
// (a temporary file, fsync'd, renamed). Markers are never deleted, as
// files or in a store: a marker answers a retry of its call for as long as
// the store is kept.
func (b *DirBackend) MarkApplied(ctx context.Context, marker string, record []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validMarker(marker) {
		return fmt.Errorf("docstore: malformed marker %q", marker)
	}
	if b.markers != nil {
		if err := b.markers.MarkApplied(ctx, marker, record); err != nil {
			return fmt.Errorf("mark %s applied: %w", marker, err)
		}
		return nil
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
