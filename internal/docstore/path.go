package docstore

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ValidatePath checks a document path and says what is wrong in words fit
// for the model; the error wraps ErrInvalidPath. A valid path is
//
//   - non-empty, at most MaxPathBytes bytes, every segment at most
//     MaxSegmentBytes bytes (the file-name limit of common file systems, so a
//     path that passes here never fails later with "file name too long");
//   - valid UTF-8 in Unicode normalization form C, without control, format
//     (zero-width, bidirectional override…), line or paragraph separator or
//     private-use characters, and without backslashes — so two paths that
//     look the same to an approver are the same bytes;
//   - relative (no leading "/"), clean (no empty, "." or ".." segments, no
//     trailing "/"), with no segment that starts or ends with white space;
//   - not inside the reserved ".applied/" folder.
//
// Both backends accept exactly these paths, so a document written in one
// mode can be addressed in the other.
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
	for _, seg := range strings.Split(p, "/") {
		if err := checkSegment(seg); err != nil {
			return err
		}
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
	segs := strings.Split(prefix, "/")
	for i, seg := range segs {
		switch {
		case seg == "..":
			return fmt.Errorf("%w: prefix %q contains \"..\"", ErrInvalidPath, prefix)
		case seg == "" && i < len(segs)-1, seg == "." && i < len(segs)-1:
			return fmt.Errorf("%w: prefix %q is not clean; use single slashes and no \".\" segments", ErrInvalidPath, prefix)
		case len(seg) > MaxSegmentBytes:
			return fmt.Errorf("%w: a segment of prefix %q is %d bytes long; the limit is %d", ErrInvalidPath, clip(prefix), len(seg), MaxSegmentBytes)
		}
	}
	return nil
}

// checkSegment checks one segment of a clean path.
func checkSegment(seg string) error {
	if len(seg) > MaxSegmentBytes {
		return fmt.Errorf("%w: the path segment %q is %d bytes long; each folder or file name may have at most %d bytes", ErrInvalidPath, clip(seg), len(seg), MaxSegmentBytes)
	}
	first, _ := utf8.DecodeRuneInString(seg)
	last, _ := utf8.DecodeLastRuneInString(seg)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return fmt.Errorf("%w: the path segment %q starts or ends with white space", ErrInvalidPath, clip(seg))
	}
	return nil
}

func checkChars(p string) error {
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: the path is not valid UTF-8", ErrInvalidPath)
	}
	for _, r := range p {
		switch {
		case r == '\\':
			return fmt.Errorf("%w: %q contains a backslash; separate folders with \"/\"", ErrInvalidPath, clip(p))
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidPath, clip(p))
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co), r == utf8.RuneError:
			return fmt.Errorf("%w: %q contains the invisible or special character %U", ErrInvalidPath, clip(p), r)
		}
	}
	if !norm.NFC.IsNormalString(p) {
		return fmt.Errorf("%w: %q is not in Unicode normalization form C; write accented letters as single characters (for example U+00E9 for \"é\")", ErrInvalidPath, clip(p))
	}
	return nil
}

// clip shortens a name quoted in an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}
