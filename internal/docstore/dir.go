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
)

// DirBackend keeps documents as files in a local folder, for embedded mode.
// All access goes through an os.Root, so no path — not even through a
// symbolic link — reaches outside the folder. Markers and temporary files
// live in the hidden ".applied/" subfolder, which listings skip.
type DirBackend struct {
	root *os.Root
	dir  string
}

var _ Backend = (*DirBackend)(nil)

// NewDirBackend opens (creating it if needed) the folder dir as a document
// store. Call Close when done with it.
func NewDirBackend(dir string) (*DirBackend, error) {
	if dir == "" {
		return nil, fmt.Errorf("docstore: folder name is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create document folder %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open document folder %s: %w", dir, err)
	}
	return &DirBackend{root: root, dir: dir}, nil
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
	f, err := b.root.Open(p)
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
	if !st.Mode().IsRegular() {
		return "", "", ErrNotFound
	}
	if st.Size() > MaxDocumentBytes {
		return "", "", ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > MaxDocumentBytes {
		return "", "", ErrTooLarge
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
			return mapDirError(err, "create folder for "+p)
		}
	}
	return b.writeAtomic(p, []byte(text))
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
// empty, up to the store's folder.
func (b *DirBackend) Delete(ctx context.Context, p string) error {
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

// List implements Backend.
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
		start = path.Clean(prefix[:i])
	}
	var docs []DocumentInfo
	err := fs.WalkDir(b.root.FS(), start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return fs.SkipDir
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if name == appliedDir {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(name, prefix) || ValidatePath(name) != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed while walking
		}
		docs = append(docs, DocumentInfo{Path: name, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list documents under %q: %w", prefix, err)
	}
	// WalkDir orders names per folder ("a/b" before "a-c"); sort by bytes
	// like S3 does.
	sort.Slice(docs, func(i, j int) bool { return docs[i].Path < docs[j].Path })
	if limit >= 0 && len(docs) > limit {
		return docs[:limit], true, nil
	}
	return docs, false, nil
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
// the system into the Backend's sentinel errors.
func mapDirError(err error, what string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("%s: %w", what, ErrPathConflict)
	}
	return fmt.Errorf("%s: %w", what, err)
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
