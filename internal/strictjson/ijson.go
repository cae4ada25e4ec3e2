package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrTrailingData is Value's error for data that holds more than one JSON
// value.
var ErrTrailingData = errors.New("data after the top-level value")

// Value checks that data is exactly one JSON value (white space around it
// allowed) and that the value is I-JSON (RFC 7493): valid UTF-8, no lone
// surrogate escape ("\ud800"), no member name twice in one object, at any
// depth. encoding/json takes all three, the last of two equal names and
// U+FFFD for the rest, so a value that is not I-JSON can be read in more
// than one way. The value is read with jsontext, JSON v2's tokenizer, as
// the API reads its request bodies. The error is a
// *jsontext.SyntacticError, io.ErrUnexpectedEOF or ErrTrailingData;
// Problem says what it means.
func Value(data []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadValue(); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF // no value at all
		}
		return err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}

// Problem says what a syntax error of jsontext (Value's, or a decoder's
// reading an API body) is, naming the member by its path (Path) and never
// quoting the decoder's own message: "member "a.b" appears twice in the
// same object", "invalid UTF-8 or a lone surrogate escape in a string at
// byte 12", "malformed JSON at byte 3", "JSON ends too early", "data after
// the JSON value". ok is false for an error that is none of these.
func Problem(err error) (problem string, ok bool) {
	var se *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "JSON ends too early", true
	case errors.Is(err, ErrTrailingData):
		return "data after the JSON value", true
	case errors.As(err, &se):
		switch {
		case errors.Is(se.Err, jsontext.ErrDuplicateName):
			return fmt.Sprintf("member %.80q appears twice in the same object", Path(se.JSONPointer)), true
		case strings.Contains(se.Err.Error(), "UTF-8"), strings.Contains(se.Err.Error(), "surrogate"):
			return fmt.Sprintf("invalid UTF-8 or a lone surrogate escape in a string at byte %d", se.ByteOffset), true
		}
		return fmt.Sprintf("malformed JSON at byte %d", se.ByteOffset), true
	}
	return "", false
}

// Path spells a JSON pointer as a dotted path: /messages/0/role is
// messages.0.role.
func Path(p jsontext.Pointer) string {
	return strings.Join(slices.Collect(p.Tokens()), ".")
}

// KindName names a JSON kind for a message: "an object", "an array", "a
// string", "a number", "a boolean", "null".
func KindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "this value"
}
