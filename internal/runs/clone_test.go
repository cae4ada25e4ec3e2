package runs_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestCloneIsDeepAndExact checks Run.Clone on rows with every exported
// field set (reached by reflection, so a field added later is checked too):
// the copy equals the original, nil stays nil and empty stays empty, and
// changing the copy's slices, maps and pointed-to values leaves the
// original as it was. The embedded store hands out clones of the rows it
// keeps decoded, so a shared slice would let one reader change another's
// row.
func TestCloneIsDeepAndExact(t *testing.T) {
	tests := []struct {
		name string
		fill fillMode
	}{
		{name: "every field set", fill: fillAll},
		{name: "pointers set, slices and maps nil", fill: fillNilCollections},
		{name: "pointers set, slices and maps empty", fill: fillEmptyCollections},
		{name: "zero row", fill: fillNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r runs.Run
			if tt.fill != fillNone {
				fill(reflect.ValueOf(&r).Elem(), tt.fill)
			}
			want := snapshot(t, &r)
			c := r.Clone()
			if !reflect.DeepEqual(c, &r) {
				t.Fatalf("Clone() = %+v, want %+v", c, &r)
			}
			scribble(reflect.ValueOf(c).Elem())
			if got := snapshot(t, &r); got != want {
				t.Errorf("changing the clone changed the original:\ngot  %s\nwant %s", got, want)
			}
		})
	}
}

type fillMode int

const (
	fillNone fillMode = iota
	fillAll
	fillNilCollections
	fillEmptyCollections
)

// fill sets every exported field reachable from v.
func fill(v reflect.Value, mode fillMode) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), mode)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), mode)
	case reflect.Slice:
		switch {
		case mode == fillNilCollections:
		case mode == fillEmptyCollections:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		case v.Type() == reflect.TypeFor[json.RawMessage]():
			v.Set(reflect.ValueOf(json.RawMessage(`{"a":1}`)))
		default:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range v.Len() {
				fill(v.Index(i), mode)
			}
		}
	case reflect.Map:
		switch mode {
		case fillNilCollections:
		case fillEmptyCollections:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			v.Set(reflect.MakeMap(v.Type()))
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, mode)
			fill(e, mode)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	}
}

// scribble changes every element, entry and pointed-to value reachable
// from v, in place.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scribble(e)
			v.SetMapIndex(k, e)
		}
		v.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

// snapshot renders every exported field of r, nil and empty apart.
func snapshot(t *testing.T, r *runs.Run) string {
	t.Helper()
	b, err := json.Marshal(reflectDump(reflect.ValueOf(r).Elem()))
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return string(b)
}

func reflectDump(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return v.Interface().(time.Time).Format(time.RFC3339Nano)
		}
		out := map[string]any{}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				out[f.Name] = reflectDump(v.Field(i))
			}
		}
		return out
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if v.IsNil() {
			return "<nil>"
		}
		if v.Kind() == reflect.Pointer {
			return reflectDump(v.Elem())
		}
		if v.Kind() == reflect.Map {
			out := map[string]any{}
			for _, k := range v.MapKeys() {
				out[k.String()] = reflectDump(v.MapIndex(k))
			}
			return out
		}
		out := []any{}
		for i := range v.Len() {
			out = append(out, reflectDump(v.Index(i)))
		}
		return out
	default:
		return v.Interface()
	}
}
