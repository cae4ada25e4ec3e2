package docstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aymanbagabas/go-udiff"
)

// Previews are shown to approvers. Bad input yields an explanation rather
// than a Go error: the call itself will fail with the same message.

func (s *toolset) previewWrite(ctx context.Context, input json.RawMessage) (preview, base string, err error) {
	in, msg := checkWrite(input)
	if msg != "" {
		return "this call will fail: " + msg, "", nil
	}
	old, _, getErr := s.b.Get(ctx, in.Path)
	if preview, err = s.writePreview(in, old, getErr); err != nil {
		return "", "", err
	}
	return preview, reviewedBase(in.Path, old, getErr), nil
}

func (s *toolset) writePreview(in writeInput, old string, err error) (string, error) {
	switch {
	case errors.Is(err, ErrNotFound) && *in.Text == "":
		return fmt.Sprintf("creates %s as an empty document", in.Path), nil
	case errors.Is(err, ErrNotFound):
		return s.diff("/dev/null", "b/"+in.Path, "", *in.Text), nil
	case errors.Is(err, ErrTooLarge):
		return fmt.Sprintf("replaces %s, whose current text is over %d bytes (no diff), with %d bytes", in.Path, MaxDocumentBytes, len(*in.Text)), nil
	case errors.Is(err, ErrNotText):
		return fmt.Sprintf("replaces %s, whose current content is not UTF-8 text (no diff), with %d bytes", in.Path, len(*in.Text)), nil
	case err != nil:
		return failingPreview(in.Path, err)
	}
	if old == *in.Text {
		return fmt.Sprintf("no change: %s already has this text", in.Path), nil
	}
	return s.diff("a/"+in.Path, "b/"+in.Path, old, *in.Text), nil
}

func (s *toolset) previewDelete(ctx context.Context, input json.RawMessage) (preview, base string, err error) {
	in, msg := checkDelete(input)
	if msg != "" {
		return "this call will fail: " + msg, "", nil
	}
	old, _, getErr := s.b.Get(ctx, in.Path)
	if preview, err = s.deletePreview(in, old, getErr); err != nil {
		return "", "", err
	}
	return preview, reviewedBase(in.Path, old, getErr), nil
}

func (s *toolset) deletePreview(in pathInput, old string, err error) (string, error) {
	switch {
	case errors.Is(err, ErrTooLarge):
		return fmt.Sprintf("deletes %s, whose text is over %d bytes (no diff)", in.Path, MaxDocumentBytes), nil
	case errors.Is(err, ErrNotText):
		return fmt.Sprintf("deletes %s, whose content is not UTF-8 text (no diff)", in.Path), nil
	case err != nil:
		return failingPreview(in.Path, err)
	}
	if old == "" {
		return fmt.Sprintf("deletes %s, which is empty", in.Path), nil
	}
	return s.diff("a/"+in.Path, "/dev/null", old, ""), nil
}

// failingPreview says why the call will fail when the document cannot be
// read for a reason about the path, in the words the call itself will use;
// any other error is returned (the loop shows approvers that the preview
// is unavailable, never the error's text).
func failingPreview(p string, err error) (string, error) {
	res, err := toolError(p, err)
	if err != nil {
		return "", err
	}
	return "this call will fail: " + res.Content, nil
}

// diff returns the whole unified diff of old and new: approvers see every
// line a write changes (the largest, for two documents of MaxDocumentBytes,
// stays under loop.MaxPreviewBytes).
func (s *toolset) diff(oldLabel, newLabel, old, new string) string {
	return udiff.Unified(oldLabel, newLabel, old, new)
}
