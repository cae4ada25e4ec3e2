package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testDirectory(t *testing.T) *Directory {
	t.Helper()
	d, err := LoadDirectory(filepath.Join("testdata", "directory.json"))
	if err != nil {
		t.Fatalf("LoadDirectory: %v", err)
	}
	return d
}

func TestLookupAnyAliasFindsThePerson(t *testing.T) {
	d := testDirectory(t)
	tests := []struct{ alias, person string }{
		{"ann@example.com", "ann"},
		{"Ann@EXAMPLE.com", "ann"},
		{"ann+deploys@example.com", "ann"},
		{"arn:aws:iam::123456789012:user/ann", "ann"},
		{"arn:aws:iam::123456789012:user/some/path/ANN", "ann"},
		{"ANN", "ann"},
		{"arn:aws:sts::123456789012:assumed-role/BobAdmin/bob-laptop", "bob"},
		{"arn:aws:iam::123456789012:role/BobAdmin", "bob"},
		{"carol", "carol"},
		{"nobody@example.com", ""},
		{"arn:aws:iam::999999999999:user/ann", ""},
	}
	for _, tt := range tests {
		t.Run(tt.alias, func(t *testing.T) {
			s := d.Lookup(MustParse(tt.alias))
			got := ""
			if s.Person != nil {
				got = s.Person.ID
			}
			if got != tt.person {
				t.Errorf("Lookup(%q) = person %q, want %q", tt.alias, got, tt.person)
			}
		})
	}
	if s := d.Lookup(MustParse("arn:aws:sts::123456789012:assumed-role/ci-runner/build-42")); !s.IsServiceAccount() || s.Key() != "service:ci" {
		t.Errorf("a session of the CI role = %+v, want service account ci", s)
	}
}

func TestSubjectSame(t *testing.T) {
	d := testDirectory(t)
	tests := []struct {
		a, b string
		want bool
	}{
		{"ann@example.com", "arn:aws:iam::123456789012:user/ann", true},
		{"ann+x@example.com", "ann", true},
		{"ann@example.com", "bob@example.com", false},
		{"bob", "arn:aws:sts::123456789012:assumed-role/BobAdmin/s1", true},
		// without an entry: canonical comparison
		{"zed@example.com", "Zed+1@Example.com", true},
		{"zed@example.com", "zed", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+"~"+tt.b, func(t *testing.T) {
			if got := d.Lookup(MustParse(tt.a)).Same(d.Lookup(MustParse(tt.b))); got != tt.want {
				t.Errorf("Same(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
	var nilDir *Directory
	if !nilDir.Lookup(MustParse("ann@example.com")).Same(nilDir.Lookup(MustParse("ANN+z@example.com"))) {
		t.Error("the nil directory does not compare canonically")
	}
	if (Subject{}).Same(Subject{}) {
		t.Error("zero subjects are the same, want nothing to be the same as the zero subject")
	}
}

func TestPersonMailboxAndGroups(t *testing.T) {
	d := testDirectory(t)
	bob, _ := d.Person("bob")
	if m, ok := bob.Mailbox(); !ok || m != "bob@example.com" {
		t.Errorf("bob's mailbox = %q, %v", m, ok)
	}
	erin, _ := d.Person("erin")
	if _, ok := erin.Mailbox(); ok {
		t.Error("erin has no e-mail alias but a mailbox")
	}
	if len(bob.Groups) != 2 || bob.Groups[0].Name != "ops" || bob.Groups[1].Name != "finance" {
		t.Errorf("bob's groups = %v, want ops, finance", bob.Groups)
	}
}

func TestDirectoryValidation(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string // every substring must appear in the error
	}{
		{"version", `{"version":2,"persons":[]}`, []string{"version: got 2, want 1"}},
		{"unknown field", `{"version":1,"persons":[],"admins":[]}`, []string{`unknown field "admins"`}},
		{"trailing data", `{"version":1,"persons":[]} {}`, []string{"trailing data"}},
		// A decoding error inside an entry names the entry and the field
		// (tester helper-109 P3-9).
		{"wrong type in a person", `{"version":1,"persons":[{"id":"a","aliases":["a"]},{"id":"b","aliases":"b"}]}`, []string{`directory: persons[1] "b": aliases: json: cannot unmarshal string into []string`}},
		{"wrong type before the id", `{"version":1,"persons":[{"aliases":"b","id":"b"}]}`, []string{`directory: persons[0] "b": aliases:`}},
		{"unknown field in a person", `{"version":1,"persons":[{"id":"a","aliases":["a"],"email":"a@example.com"}]}`, []string{`directory: persons[0] "a": json: unknown field "email"`}},
		{"wrong type of the id", `{"version":1,"persons":[{"id":7,"aliases":["a"]}]}`, []string{`directory: persons[0]: id: json: cannot unmarshal number into string`}},
		{"a person not an object", `{"version":1,"persons":["a"]}`, []string{`directory: persons[0]: json: cannot unmarshal string into an object`}},
		{"persons not an array", `{"version":1,"persons":{}}`, []string{`directory: persons: json: cannot unmarshal object into an array`}},
		{"wrong type in a group", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"groups":[{"name":"g","members":"a"}]}`, []string{`directory: groups[0] "g": members: json: cannot unmarshal string into []string`}},
		{"unknown field in a group", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"groups":[{"name":"g","members":["a"],"id":"x"}]}`, []string{`directory: groups[0] "g": json: unknown field "id"`}},
		{"wrong type in a service account", `{"version":1,"persons":[],"service_accounts":[{"id":"ci","aliases":[1]}]}`, []string{`directory: service_accounts[0] "ci": aliases: json: cannot unmarshal number into string`}},
		{"bad id", `{"version":1,"persons":[{"id":"Ann","aliases":["a@example.com"]}]}`, []string{`persons[0] "Ann": id`}},
		{"duplicate id", `{"version":1,"persons":[{"id":"a","aliases":["a@example.com"]},{"id":"a","aliases":["b@example.com"]}]}`, []string{`persons[1] "a": id is used twice`}},
		{"no aliases", `{"version":1,"persons":[{"id":"a","aliases":[]}]}`, []string{`persons[0] "a": at least one alias`}},
		{"bad alias", `{"version":1,"persons":[{"id":"a","aliases":["Ann <a@example.com>"]}]}`, []string{`persons[0] "a": aliases[0]`}},
		{"session alias", `{"version":1,"persons":[{"id":"a","aliases":["arn:aws:sts::123456789012:assumed-role/R/s1"]}]}`, []string{"list the role ARN"}},
		{"alias claimed twice by case", `{"version":1,"persons":[{"id":"a","aliases":["ann@example.com"]},{"id":"b","aliases":["ANN@example.com"]}]}`, []string{`persons[1] "b": aliases[0] "ANN@example.com": the same principal as an alias of person "a"`}},
		{"alias claimed twice by tag", `{"version":1,"persons":[{"id":"a","aliases":["ann@example.com"]},{"id":"b","aliases":["ann+b@example.com"]}]}`, []string{`of person "a"`}},
		{"role claimed twice by path", `{"version":1,"persons":[{"id":"a","aliases":["arn:aws:iam::123456789012:role/x/R"]}],"service_accounts":[{"id":"s","aliases":["arn:aws:iam::123456789012:role/R"]}]}`, []string{`service_accounts[0] "s": aliases[0]`, `of person "a"`}},
		{"service id is a person id", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"service_accounts":[{"id":"a","aliases":["b"]}]}`, []string{"also a person's id"}},
		{"unknown member", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"groups":[{"name":"g","members":["a","zz"]}]}`, []string{`groups[0] "g": members[1] "zz" is not a person id`}},
		{"service member", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"service_accounts":[{"id":"ci","aliases":["ci"]}],"groups":[{"name":"g","members":["ci"]}]}`, []string{"is a service account"}},
		{"member twice", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"groups":[{"name":"g","members":["a","a"]}]}`, []string{"listed twice"}},
		{"empty group", `{"version":1,"persons":[],"groups":[{"name":"g","members":[]}]}`, []string{"at least one member"}},
		{"group twice", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"groups":[{"name":"g","members":["a"]},{"name":"g","members":["a"]}]}`, []string{`groups[1] "g": name is used twice`}},
		{"bad group tool", `{"version":1,"persons":[{"id":"a","aliases":["a"]}],"groups":[{"name":"g","members":["a"],"tools":["ok","bad tool"]}]}`, []string{`groups[0] "g": tools[1]`}},
		{"bad person tool", `{"version":1,"persons":[{"id":"a","aliases":["a"],"tools":["x?"]}]}`, []string{`persons[0] "a": tools[0]`}},
		{"bidi name", `{"version":1,"persons":[{"id":"a","name":"Ann \u202e","aliases":["a"]}]}`, []string{`persons[0] "a": name`}},
		{"all problems at once", `{"version":1,"persons":[{"id":"A","aliases":["a"]},{"id":"b","aliases":[]}]}`, []string{`persons[0] "A"`, `persons[1] "b"`}},
		// former_ids: a rename record.
		{"former ids not a list", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":"x"}]}`, []string{`directory: persons[0] "a": former_ids: json: cannot unmarshal string into []string`}},
		{"bad former id", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":["ok","Ann"]}]}`, []string{`directory: persons[0] "a": former_ids[1]: "Ann": use lowercase letters`}},
		{"empty former id", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":[""]}]}`, []string{`persons[0] "a": former_ids[0]: must be 1 to 64 characters`}},
		{"former id is the entry's own", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":["a"]}]}`, []string{`persons[0] "a": former_ids[0] "a": is the entry's own id`}},
		{"former id is another person's id", `{"version":1,"persons":[{"id":"a","aliases":["a"]},{"id":"b","aliases":["b"],"former_ids":["a"]}]}`, []string{`persons[1] "b": former_ids[0] "a": is a person's id now`}},
		{"former id is a later person's id", `{"version":1,"persons":[{"id":"b","aliases":["b"],"former_ids":["a"]},{"id":"a","aliases":["a"]}]}`, []string{`persons[0] "b": former_ids[0] "a": is a person's id now`}},
		{"former id is a service account's id", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":["ci"]}],"service_accounts":[{"id":"ci","aliases":["ci"]}]}`, []string{`persons[0] "a": former_ids[0] "ci": is a service account's id`}},
		{"former id listed twice", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":["x","x"]}]}`, []string{`persons[0] "a": former_ids[1] "x": is listed twice`}},
		{"former id of two persons", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":["x"]},{"id":"b","aliases":["b"],"former_ids":["x"]}]}`, []string{`persons[1] "b": former_ids[0] "x": is also a former id of persons[0] "a"`}},
		{"group member by a former id", `{"version":1,"persons":[{"id":"a","aliases":["a"],"former_ids":["x"]}],"groups":[{"name":"g","members":["x"]}]}`, []string{`groups[0] "g": members[0] "x" is a former id of person "a"; list their id`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeDirectory([]byte(tt.json))
			if err == nil {
				t.Fatalf("DecodeDirectory accepted %s, want an error", tt.json)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadDirectoryErrorsNameTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"persons":[{"id":"a"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadDirectory(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadDirectory error = %v, want it to name %s", err, path)
	}
	if _, err := LoadDirectory(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("LoadDirectory of a missing file succeeded")
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, make([]byte, MaxDirectoryBytes+2), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDirectory(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("LoadDirectory of an oversized file = %v, want a size error", err)
	}
}

// TestRecordedPersonFollowsFormerIDs: a subject key recorded under an
// earlier directory ("person:<id>") names the person with that id now, or
// the person that lists it among its former ids; nothing else.
func TestRecordedPersonFollowsFormerIDs(t *testing.T) {
	d, err := DecodeDirectory([]byte(`{"version":1,"persons":[
  {"id":"alice.smith","aliases":["alice.smith@example.com"],"former_ids":["alice","asmith"]},
  {"id":"bob","aliases":["bob@example.com"]}],
  "service_accounts":[{"id":"ci","aliases":["ci-bot"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := d.Person("alice.smith")
	if got := alice.FormerIDs; strings.Join(got, ",") != "alice,asmith" {
		t.Errorf("FormerIDs = %v, want [alice asmith]", got)
	}
	tests := []struct {
		key, want string // want: the person's id, "" for none
	}{
		{"person:alice.smith", "alice.smith"},
		{"person:alice", "alice.smith"},
		{"person:asmith", "alice.smith"},
		{"person:bob", "bob"},
		{"person:carol", ""},
		{"person:", ""},
		{"alice", ""},
		{"service:ci", ""},
		{"email:alice@example.com", ""},
		{"", ""},
	}
	for _, tt := range tests {
		p, ok := d.RecordedPerson(tt.key)
		got := ""
		if ok {
			got = p.ID
		}
		if got != tt.want {
			t.Errorf("RecordedPerson(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	if _, ok := d.Person("alice"); ok {
		t.Error(`Person("alice") found a person: a former id is not an id`)
	}
	var none *Directory
	if _, ok := none.RecordedPerson("person:alice"); ok {
		t.Error("the nil directory names a person")
	}
}
