package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentgate/agentgate/internal/strictjson"
)

// decodeStrict decodes the JSON body b into v (a pointer) as JSON v2's
// Unmarshal does with RejectUnknownMembers, without linking JSON v2's
// reflective decoder (0.58 MB of each worker binary, issue #15):
//   - jsontext, JSON v2's own tokenizer, reads exactly one value of I-JSON
//     (valid UTF-8, no lone surrogate escape, no member name twice in an
//     object);
//   - a walk over that value and v's type refuses every member name that is
//     not exactly one of the struct's JSON names (no unknown and no
//     case-variant names) and every value of a JSON kind its Go type cannot
//     hold (a number that is not an integer of the field's size included,
//     and null anywhere but in a raw value, where JSON v2 would decode the
//     zero value), naming the member by its JSON pointer (*shapeError);
//   - encoding/json then fills v from a body it can no longer read
//     differently: every name matches exactly and every value fits.
//
// The request bodies hold strings, numbers, booleans, pointers, slices,
// string-keyed maps, structs and json.RawMessage; a type the walk does not
// know is left to encoding/json.
func decodeStrict(b []byte, v any) error {
	_, err := decodeStrictGiven(b, v)
	return err
}

// givenMembers holds the JSON pointers of the members a body gives, so a
// handler can tell a member written out with its type's zero value (0, "",
// false) from one left out, without decoding the body again. null is given
// only to raw values (a tool's input), where it is data.
type givenMembers map[string]bool

// decodeStrictGiven is decodeStrict, also returning the members given.
func decodeStrictGiven(b []byte, v any) (givenMembers, error) {
	w := walker{dec: jsontext.NewDecoder(bytes.NewReader(b)), given: givenMembers{}}
	err := w.value(reflect.TypeOf(v).Elem(), "")
	if err == nil {
		if _, end := w.dec.ReadToken(); !errors.Is(end, io.EOF) {
			err = errTrailingData
		}
	}
	switch {
	case err != nil && len(w.overflows) > 0:
		// A body that is not otherwise sound is refused at its first
		// overflowing integer, as JSON v2 refuses it.
		return nil, w.overflows[0].shape
	case err != nil:
		return nil, err
	case len(w.overflows) == 0:
		return w.given, json.Unmarshal(b, v)
	}
	// Fill v with each overflowing integer at its type's bound, so that a
	// validator can still say the member's range, and report the first.
	saturated := make([]byte, 0, len(b))
	last := 0
	for _, o := range w.overflows {
		saturated = append(append(saturated, b[last:o.start]...), o.bound...)
		last = o.end
	}
	saturated = append(saturated, b[last:]...)
	if err := json.Unmarshal(saturated, v); err != nil {
		return nil, err
	}
	first := w.overflows[0]
	return w.given, &rangeError{Pointer: first.ptr, Value: string(b[first.start:first.end]), Bound: first.bound}
}

// rangeError is an integer written as one, for an integer member, that its
// Go type cannot hold (9223372036854775808 for an int64): well-formed but
// out of range, so invalid (422) rather than malformed (400), as any other
// number out of its member's range. decodeStrict returns it with v filled,
// the member at its type's bound (Bound), which a validator refuses with
// the member's own range where it has one.
type rangeError struct {
	Pointer jsontext.Pointer
	Value   string
	Bound   string
}

func (e *rangeError) Error() string {
	return "integer out of range at " + string(e.Pointer)
}

// overflow is one integer of the body its member cannot hold: its bytes
// [start, end), the bound they stand for, and the answer to a body not
// otherwise sound (the kind's refusal JSON v2 gives).
type overflow struct {
	ptr        jsontext.Pointer
	start, end int
	bound      string
	shape      *shapeError
}

// walker reads one JSON value with dec, checking it against a Go type and
// noting the members given.
type walker struct {
	dec       *jsontext.Decoder
	given     givenMembers
	overflows []overflow
}

// errTrailingData: the body holds more than one JSON value.
var errTrailingData = errors.New("data after the top-level value")

// shapeError is a member or value the Go type does not take.
type shapeError struct {
	// Pointer locates the member (an unknown name) or the value.
	Pointer jsontext.Pointer
	// Unknown: the member's name is none of the struct's JSON names.
	Unknown bool
	// GoType is the type the value was to be decoded into.
	GoType reflect.Type
	// Kind and Value are the JSON value's kind and, for a number, its text.
	Kind  jsontext.Kind
	Value string
}

func (e *shapeError) Error() string {
	if e.Unknown {
		return "unknown member " + string(e.Pointer)
	}
	return "cannot decode " + strictjson.KindName(e.Kind) + " at " + string(e.Pointer) + " into " + e.GoType.String()
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// value reads the next value from w.dec, at ptr, checking it against t.
// A value of a kind t cannot hold is refused as JSON v2 refuses it: at its
// first token for a struct, map or slice, after reading it through for a
// scalar (a syntactic error inside it then comes first).
func (w *walker) value(t reflect.Type, ptr jsontext.Pointer) error {
	dec := w.dec
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := dec.PeekKind()
	switch {
	case kind == 0:
		_, err := dec.ReadToken() // the syntactic error, or io.ErrUnexpectedEOF
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	case t == rawMessageType || t.Kind() == reflect.Interface:
		_, err := dec.ReadValue()
		return err
	case kind == 'n':
		// null is no value of a member, an item or a map entry: the spec
		// gives none of them null, and API Gateway's request models (the
		// spec's types) refuse it too. JSON v2 and encoding/json would
		// decode it as the zero value, a null approver as "", a null
		// metadata value as "". A raw value (a tool's input) may be null.
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		return &shapeError{Pointer: ptr, GoType: t, Kind: kind}
	case kind == '{' && t.Kind() == reflect.Struct:
		return w.object(ptr, func(name string) (reflect.Type, bool) {
			f, ok := jsonFields(t)[name]
			return f, ok
		})
	case kind == '{' && t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		return w.object(ptr, func(string) (reflect.Type, bool) { return t.Elem(), true })
	case kind == '[' && t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			if err := w.value(t.Elem(), ptr.AppendToken(strconv.Itoa(i))); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	}
	if kind == '{' || kind == '[' { // an object or array t cannot hold
		// JSON v2 reads a value meant for a string, number, boolean or
		// bytes whole before it looks at its kind, so a syntactic error
		// inside it (invalid UTF-8, a duplicate name, a cut body) is
		// reported instead of the kind; a struct, map or slice refuses
		// the value at its first token.
		if !composite(t) {
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
		return &shapeError{Pointer: ptr, GoType: t, Kind: kind}
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if fits(tok, kind, t) {
		return nil
	}
	if bound, ok := integerBound(tok, kind, t); ok {
		end := int(dec.InputOffset())
		if start := end - len(tok.String()); start >= 0 {
			shape := &shapeError{Pointer: ptr, GoType: t, Kind: kind, Value: tok.String()}
			w.overflows = append(w.overflows, overflow{ptr: ptr, start: start, end: end, bound: bound, shape: shape})
			return nil
		}
	}
	e := &shapeError{Pointer: ptr, GoType: t, Kind: kind}
	if kind == '0' {
		e.Value = tok.String()
	}
	return e
}

// composite says whether t is decoded from an object or array token by
// token (a struct, a map, a slice or array other than bytes).
func composite(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return true
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8
	}
	return false
}

// object reads an object at ptr, each member's value checked against the
// type field returns for its name (false: an unknown name).
func (w *walker) object(ptr jsontext.Pointer, field func(name string) (reflect.Type, bool)) error {
	dec := w.dec
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		ft, ok := field(name.String())
		if !ok {
			return &shapeError{Pointer: ptr.AppendToken(name.String()), Unknown: true}
		}
		at := ptr.AppendToken(name.String())
		w.given[string(at)] = true
		if err := w.value(ft, at); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// fits says whether a scalar token of kind decodes into t.
func fits(tok jsontext.Token, kind jsontext.Kind, t reflect.Type) bool {
	switch kind {
	case '"':
		return t.Kind() == reflect.String || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8)
	case 't', 'f':
		return t.Kind() == reflect.Bool
	case '0':
		s := tok.String()
		var err error
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err = strconv.ParseInt(s, 10, t.Bits())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			_, err = strconv.ParseUint(s, 10, t.Bits())
		case reflect.Float32, reflect.Float64:
			_, err = strconv.ParseFloat(s, t.Bits())
		default:
			return false
		}
		return err == nil
	}
	return false
}

// integerBound says whether a number token that does not fit t is an
// integer written as one (digits, a leading minus at most) too large for
// t's integer type, and gives the bound of t on its side.
func integerBound(tok jsontext.Token, kind jsontext.Kind, t reflect.Type) (string, bool) {
	if kind != '0' {
		return "", false
	}
	s := tok.String()
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, t.Bits())
		if !errors.Is(err, strconv.ErrRange) {
			return "", false
		}
		return strconv.FormatInt(n, 10), true // ParseInt's n is the bound
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(s, 10, t.Bits())
		if !errors.Is(err, strconv.ErrRange) {
			return "", false
		}
		return strconv.FormatUint(n, 10), true
	}
	return "", false
}

// fieldCache holds jsonFields' answers per struct type.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the JSON names of struct type t's fields with their
// types, as encoding/json names them: the tag's name, else the field's;
// "-" and unexported fields left out; an untagged embedded struct's fields
// promoted unless t has a field of the same name.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var promoted []map[string]reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && (!hasTag || name == "") && ft.Kind() == reflect.Struct {
			promoted = append(promoted, jsonFields(ft))
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	for _, p := range promoted {
		for name, ft := range p {
			if _, ok := m[name]; !ok {
				m[name] = ft
			}
		}
	}
	fieldCache.Store(t, m)
	return m
}
