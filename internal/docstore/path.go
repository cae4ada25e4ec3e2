package docstore

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidatePath checks a document path: non-empty, at most MaxPathBytes,
// valid UTF-8 without control characters or backslashes, relative (no
// leading "/"), clean (no empty, "." or ".." segments, no trailing "/"),
// and not inside the reserved ".applied/" folder. The error wraps
// ErrInvalidPath and says what is wrong in words fit for the model.
func ValidatePath(p string) error {
	if p == "" {
		return fmt.Errorf("%w: the path is empty", ErrInvalidPath)
	}
	if len(p) > MaxPathBytes {
		return fmt.Errorf("%w: the path is %d bytes long; the limit is %d", ErrInvalidPath, len(p), MaxPathBytes)
	}
	if err := checkChars(p); err != nil {
		return err
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: %q is absolute; use a relative path such as \"guide/intro.md\"", ErrInvalidPath, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return fmt.Errorf("%w: %q contains \"..\"; paths may not leave the document store", ErrInvalidPath, p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("%w: %q is not clean; use single slashes, no \".\" segments and no trailing slash", ErrInvalidPath, p)
	}
	if p == appliedDir || strings.HasPrefix(p, appliedDir+"/") {
		return fmt.Errorf("%w: %q is inside the reserved folder %q", ErrInvalidPath, p, appliedDir+"/")
	}
	return nil
}

// validatePrefix checks a listing prefix: like a path, but it may be empty,
// end with "/" or stop in the middle of a segment.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxPathBytes {
		return fmt.Errorf("%w: the prefix is %d bytes long; the limit is %d", ErrInvalidPath, len(prefix), MaxPathBytes)
	}
	if err := checkChars(prefix); err != nil {
		return err
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("%w: prefix %q is absolute; use a relative prefix such as \"guide/\"", ErrInvalidPath, prefix)
	}
	for _, seg := range strings.Split(prefix, "/") {
		if seg == ".." {
			return fmt.Errorf("%w: prefix %q contains \"..\"", ErrInvalidPath, prefix)
		}
	}
	return nil
}

func checkChars(p string) error {
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: the path is not valid UTF-8", ErrInvalidPath)
	}
	for _, r := range p {
		if r == '\\' {
			return fmt.Errorf("%w: %q contains a backslash; separate folders with \"/\"", ErrInvalidPath, p)
		}
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidPath, p)
		}
	}
	return nil
}
