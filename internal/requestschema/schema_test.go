package requestschema

import (
	"encoding/json"
	"reflect"
	"testing"
)

type inner struct {
	N int `json:"n"`
}

type Embedded struct {
	E string `json:"e"`
}

type sample struct {
	Embedded
	S      string            `json:"s,omitempty"`
	B      bool              `json:"b"`
	U      uint8             `json:"u"`
	F      float64           `json:"f"`
	L      []inner           `json:"l"`
	M      map[string]string `json:"m"`
	P      *inner            `json:"p"`
	Raw    json.RawMessage   `json:"raw"`
	Q      int               `json:"q,string"`
	Skip   string            `json:"-"`
	hidden string
	Plain  string
}

func TestOf(t *testing.T) {
	got, err := json.Marshal(Of(reflect.TypeFor[sample]()))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{` +
		`"Plain":{"type":["string","null"]},` +
		`"b":{"type":["boolean","null"]},` +
		`"e":{"type":["string","null"]},` +
		`"f":{"type":["number","null"]},` +
		`"l":{"items":{"additionalProperties":false,"properties":{"n":{"type":["integer","null"]}},"type":["object","null"]},"type":["array","null"]},` +
		`"m":{"additionalProperties":{"type":["string","null"]},"type":["object","null"]},` +
		`"p":{"additionalProperties":false,"properties":{"n":{"type":["integer","null"]}},"type":["object","null"]},` +
		`"q":{"type":["string","null"]},` +
		`"raw":{},` +
		`"s":{"type":["string","null"]},` +
		`"u":{"minimum":0,"type":["integer","null"]}` +
		`},"type":["object","null"]}`
	if string(got) != want {
		t.Errorf("Of(sample)\n got %s\nwant %s", got, want)
	}
}

type node struct {
	Next *node `json:"next"`
}

func TestOfRecursiveType(t *testing.T) {
	got, _ := json.Marshal(Of(reflect.TypeFor[node]()))
	want := `{"additionalProperties":false,"properties":{"next":{}},"type":["object","null"]}`
	if string(got) != want {
		t.Errorf("Of(node) = %s, want %s", got, want)
	}
}

func TestBodies(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Bodies {
		d := b.Document()
		if d["$schema"] != Draft4 || d["title"] != b.Name {
			t.Errorf("%s: $schema %v title %v", b.Name, d["$schema"], d["title"])
		}
		if d["additionalProperties"] != false {
			t.Errorf("%s: the body object must be closed to unknown fields", b.Name)
		}
		if seen[b.Name] {
			t.Errorf("model name %s used twice", b.Name)
		}
		seen[b.Name] = true
	}
}
