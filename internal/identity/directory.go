package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentgate/agentgate/internal/strictjson"
	"github.com/agentgate/agentgate/internal/toolpattern"
)

// DirectoryVersion is the only directory file version this package reads.
const DirectoryVersion = 1

// MaxDirectoryBytes bounds a directory file.
const MaxDirectoryBytes = 1 << 20

// DirectoryFile is the JSON schema of the deployment directory file. See
// the README ("Directory") for a commented example.
type DirectoryFile struct {
	// Version must be 1.
	Version int `json:"version"`
	// GroupApproversOnly makes runs name their approvers as "group:<name>"
	// only, so an initiator cannot pick their own approver.
	GroupApproversOnly bool `json:"group_approvers_only,omitempty"`
	// Persons are the people who may start runs and decide approvals.
	Persons PersonEntries `json:"persons"`
	// Groups are named sets of persons, optionally limited to tools.
	Groups GroupEntries `json:"groups,omitempty"`
	// ServiceAccounts are non-human callers: they may start runs, never decide.
	ServiceAccounts ServiceAccountEntries `json:"service_accounts,omitempty"`
}

// PersonEntry is one person of the directory file.
type PersonEntry struct {
	// ID names the person in groups and in the audit: lowercase letters,
	// digits, '.', '_', '-'.
	ID string `json:"id"`
	// Name is a display name (optional).
	Name string `json:"name,omitempty"`
	// Aliases are the principals that are this person: e-mail addresses,
	// IAM user or role ARNs, local names. The first e-mail alias is where
	// approval mail goes. Assumed-role session ARNs are not aliases: list
	// the role.
	Aliases []string `json:"aliases"`
	// Tools limits what the person may approve, whichever way they are
	// named (tool patterns; empty: any tool).
	Tools []string `json:"tools,omitempty"`
	// FormerIDs are ids this person had before (optional): a rename
	// record. What was recorded under one of them (a vote, a run's
	// initiator, an approval link, each kept as "person:<id>") is this
	// person's (Directory.RecordedPerson). None may be anyone's id now, nor
	// listed twice.
	FormerIDs []string `json:"former_ids,omitempty"`
}

// GroupEntry is one group of the directory file.
type GroupEntry struct {
	// Name is what runs and rules write after "group:".
	Name string `json:"name"`
	// Members are person ids.
	Members []string `json:"members"`
	// Tools limits what members may approve through this group (tool
	// patterns; empty: any tool).
	Tools []string `json:"tools,omitempty"`
}

// ServiceAccountEntry is one service account of the directory file.
type ServiceAccountEntry struct {
	// ID names the service account in the audit.
	ID string `json:"id"`
	// Aliases are its principals (typically IAM role ARNs).
	Aliases []string `json:"aliases"`
}

// PersonEntries, GroupEntries and ServiceAccountEntries are the lists of
// a directory file. They decode strictly (an unknown field is an error)
// and an error names the entry it is in, by list, index and id (a group's
// name), and the field, as NewDirectory's do: persons[1] "bob": aliases:
// json: cannot unmarshal string into []string.
type (
	PersonEntries         []PersonEntry
	GroupEntries          []GroupEntry
	ServiceAccountEntries []ServiceAccountEntry
)

// UnmarshalJSON decodes the persons one by one, so that an error names
// its entry.
func (es *PersonEntries) UnmarshalJSON(data []byte) error {
	return decodeEntries((*[]PersonEntry)(es), data, "persons", "id")
}

// UnmarshalJSON decodes the groups one by one, so that an error names its
// entry.
func (es *GroupEntries) UnmarshalJSON(data []byte) error {
	return decodeEntries((*[]GroupEntry)(es), data, "groups", "name")
}

// UnmarshalJSON decodes the service accounts one by one, so that an error
// names its entry.
func (es *ServiceAccountEntries) UnmarshalJSON(data []byte) error {
	return decodeEntries((*[]ServiceAccountEntry)(es), data, "service_accounts", "id")
}

// decodeEntries decodes data, the JSON array list of a directory file,
// into out entry by entry and strictly (strictjson.Entries); an error names
// the entry by its index and, when it has one that decodes, its key member
// (id or name).
func decodeEntries[T any](out *[]T, data []byte, list, key string) error {
	name := func(i int, raw json.RawMessage) string {
		var named map[string]json.RawMessage
		var name string
		if json.Unmarshal(raw, &named) == nil && json.Unmarshal(named[key], &name) == nil {
			return fmt.Sprintf("%s[%d] %q", list, i, name)
		}
		return fmt.Sprintf("%s[%d]", list, i)
	}
	return strictjson.Entries(out, data, list, name, "an array", "an object")
}

// Person is a human with one or more aliases.
type Person struct {
	ID      string
	Name    string
	Aliases []Principal
	// FormerIDs are the ids the person had before (PersonEntry.FormerIDs).
	FormerIDs []string
	// Tools limits what the person may approve (nil: any tool).
	Tools  []toolpattern.Pattern
	Groups []*Group
}

// Mailbox returns the person's first e-mail alias, where approval mail goes.
func (p *Person) Mailbox() (string, bool) {
	for _, a := range p.Aliases {
		if m, ok := a.Mailbox(); ok {
			return m, true
		}
	}
	return "", false
}

// mayApprove applies the person's own tool limit.
func (p *Person) mayApprove(tool string) bool {
	return p.Tools == nil || toolpattern.AnyMatch(p.Tools, tool)
}

// Group is a named set of persons.
type Group struct {
	Name    string
	Members []*Person
	// Tools limits what members may approve through the group (nil: any tool).
	Tools []toolpattern.Pattern
}

// Has reports whether the person is a member.
func (g *Group) Has(p *Person) bool {
	for _, m := range g.Members {
		if m == p {
			return true
		}
	}
	return false
}

func (g *Group) permits(tool string) bool {
	return g.Tools == nil || toolpattern.AnyMatch(g.Tools, tool)
}

// ServiceAccount is a non-human caller; it never decides.
type ServiceAccount struct {
	ID      string
	Aliases []Principal
}

// Directory maps aliases to persons, groups and service accounts. A nil
// *Directory is the empty directory: every principal is only itself.
type Directory struct {
	persons    map[string]*Person
	groups     map[string]*Group
	services   map[string]*ServiceAccount
	byKey      map[string]*Person
	serviceKey map[string]*ServiceAccount
	// former maps each former id (PersonEntry.FormerIDs) to its person.
	former     map[string]*Person
	groupsOnly bool
}

// LoadDirectory reads and validates a directory file.
func LoadDirectory(path string) (*Directory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("directory: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDirectoryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", path, err)
	}
	d, err := DecodeDirectory(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// DecodeDirectory decodes a directory file strictly (unknown fields and
// trailing data are errors) and validates it.
func DecodeDirectory(data []byte) (*Directory, error) {
	if len(data) > MaxDirectoryBytes {
		return nil, fmt.Errorf("directory: larger than %d bytes", MaxDirectoryBytes)
	}
	var f DirectoryFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("directory: %w", err)
	}
	return NewDirectory(f)
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON document")
	}
	return nil
}

// NewDirectory validates a directory file. The error lists every problem,
// each naming its entry (persons[1] "bob": aliases[0] ...).
func NewDirectory(f DirectoryFile) (*Directory, error) {
	d := &Directory{
		persons: map[string]*Person{}, groups: map[string]*Group{}, services: map[string]*ServiceAccount{},
		byKey: map[string]*Person{}, serviceKey: map[string]*ServiceAccount{}, former: map[string]*Person{},
		groupsOnly: f.GroupApproversOnly,
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if f.Version != DirectoryVersion {
		fail("version: got %d, want %d", f.Version, DirectoryVersion)
	}
	owner := map[string]string{} // alias key -> "person \"ann\"" / "service account \"ci\""
	aliases := func(where, who string, list []string) []Principal {
		if len(list) == 0 {
			fail("%s: at least one alias is required", where)
		}
		var out []Principal
		for i, a := range list {
			p, err := Parse(a)
			if err != nil {
				fail("%s: aliases[%d]: %v", where, i, err)
				continue
			}
			if p.IsSession() {
				fail("%s: aliases[%d] %q: an assumed-role session is its role; list the role ARN", where, i, a)
				continue
			}
			if prev, dup := owner[p.Key()]; dup {
				fail("%s: aliases[%d] %q: the same principal as an alias of %s", where, i, a, prev)
				continue
			}
			owner[p.Key()] = who
			out = append(out, p)
		}
		return out
	}
	for i, e := range f.Persons {
		where := fmt.Sprintf("persons[%d] %q", i, e.ID)
		if err := checkID(e.ID); err != nil {
			fail("%s: id: %v", where, err)
		} else if _, dup := d.persons[e.ID]; dup {
			fail("%s: id is used twice", where)
		}
		if err := checkDisplayName(e.Name); err != nil {
			fail("%s: name: %v", where, err)
		}
		p := &Person{ID: e.ID, Name: e.Name}
		p.Aliases = aliases(where, fmt.Sprintf("person %q", e.ID), e.Aliases)
		if len(e.Tools) > 0 {
			ps, err := toolpattern.ParseList(e.Tools)
			if err != nil {
				fail("%s: tools%v", where, err)
			}
			p.Tools = ps
		}
		d.persons[e.ID] = p
		for _, a := range p.Aliases {
			d.byKey[a.Key()] = p
		}
	}
	for i, e := range f.ServiceAccounts {
		where := fmt.Sprintf("service_accounts[%d] %q", i, e.ID)
		if err := checkID(e.ID); err != nil {
			fail("%s: id: %v", where, err)
		} else if _, dup := d.services[e.ID]; dup {
			fail("%s: id is used twice", where)
		} else if _, dup := d.persons[e.ID]; dup {
			fail("%s: id is also a person's id", where)
		}
		s := &ServiceAccount{ID: e.ID}
		s.Aliases = aliases(where, fmt.Sprintf("service account %q", e.ID), e.Aliases)
		d.services[e.ID] = s
		for _, a := range s.Aliases {
			d.serviceKey[a.Key()] = s
		}
	}
	// Former ids, once every current id is known: one former id names one
	// person, and never anyone's id now (a record under it would otherwise
	// be two subjects' at once).
	formerAt := map[string]string{} // former id -> where it is listed
	for i, e := range f.Persons {
		where := fmt.Sprintf("persons[%d] %q", i, e.ID)
		p := d.persons[e.ID]
		for j, id := range e.FormerIDs {
			at := fmt.Sprintf("%s: former_ids[%d] %q", where, j, id)
			if err := checkID(id); err != nil {
				fail("%s: former_ids[%d]: %v", where, j, err)
				continue
			}
			switch prev, dup := formerAt[id]; {
			case id == e.ID:
				fail("%s: is the entry's own id", at)
			case d.persons[id] != nil:
				fail("%s: is a person's id now (a former id names whoever had it, and someone has it now)", at)
			case d.services[id] != nil:
				fail("%s: is a service account's id", at)
			case dup && prev == where:
				fail("%s: is listed twice", at)
			case dup:
				fail("%s: is also a former id of %s; a former id is one person's", at, prev)
			default:
				formerAt[id] = where
				p.FormerIDs = append(p.FormerIDs, id)
				d.former[id] = p
			}
		}
	}
	for i, e := range f.Groups {
		where := fmt.Sprintf("groups[%d] %q", i, e.Name)
		if err := checkID(e.Name); err != nil {
			fail("%s: name: %v", where, err)
		} else if _, dup := d.groups[e.Name]; dup {
			fail("%s: name is used twice", where)
		}
		g := &Group{Name: e.Name}
		if len(e.Members) == 0 {
			fail("%s: at least one member is required", where)
		}
		for j, id := range e.Members {
			p, ok := d.persons[id]
			switch {
			case ok && g.Has(p):
				fail("%s: members[%d] %q is listed twice", where, j, id)
			case ok:
				g.Members = append(g.Members, p)
				p.Groups = append(p.Groups, g)
			case d.services[id] != nil:
				fail("%s: members[%d] %q is a service account; service accounts never decide, so they are never approvers", where, j, id)
			case d.former[id] != nil:
				fail("%s: members[%d] %q is a former id of person %q; list their id", where, j, id, d.former[id].ID)
			default:
				fail("%s: members[%d] %q is not a person id", where, j, id)
			}
		}
		if len(e.Tools) > 0 {
			ps, err := toolpattern.ParseList(e.Tools)
			if err != nil {
				fail("%s: tools%v", where, err)
			}
			g.Tools = ps
		}
		d.groups[e.Name] = g
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("directory: %w", errors.Join(errs...))
	}
	return d, nil
}

// checkID accepts ids and group names: 1 to 64 of [a-z0-9._-], starting
// with a letter or digit (lowercase only, so ids never differ by case).
func checkID(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("must be 1 to 64 characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("%q: use lowercase letters, digits, '.', '_', '-' (starting with a letter or digit)", s)
		}
	}
	return nil
}

func checkDisplayName(s string) error {
	if len(s) > 200 {
		return fmt.Errorf("at most 200 bytes")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0x2028 || r == 0x2029 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return fmt.Errorf("%q contains control or bidi characters", s)
		}
	}
	return nil
}

// GroupApproversOnly reports whether runs must name approvers as groups.
func (d *Directory) GroupApproversOnly() bool { return d != nil && d.groupsOnly }

// Person returns the person with the id.
func (d *Directory) Person(id string) (*Person, bool) {
	if d == nil {
		return nil, false
	}
	p, ok := d.persons[id]
	return p, ok
}

// RecordedPerson returns the directory person that key, a subject key
// recorded under the directory of the time (Subject.Key: a vote's person,
// a run's initiator, an approval link's recipient), names now: for
// "person:<id>", the person with that id, else the person that lists the
// id among its former ids (renamed since: PersonEntry.FormerIDs). False
// for any other key (a service account's, a bare principal's) and for an
// id no person has or lists.
func (d *Directory) RecordedPerson(key string) (*Person, bool) {
	id, ok := strings.CutPrefix(key, "person:")
	if d == nil || !ok || id == "" {
		return nil, false
	}
	if p := d.persons[id]; p != nil {
		return p, true
	}
	return d.RenamedFrom(key)
}

// RenamedFrom returns the person whose entry lists the id of key, a
// recorded "person:<id>" (RecordedPerson), among its former ids: the
// person the directory says was renamed from it. Unlike RecordedPerson it
// never returns whoever holds the id now.
func (d *Directory) RenamedFrom(key string) (*Person, bool) {
	id, ok := strings.CutPrefix(key, "person:")
	if d == nil || !ok || id == "" {
		return nil, false
	}
	p := d.former[id]
	return p, p != nil
}

// KeyOf returns the subject key (Subject.Key) of the principal whose
// comparison form is key (Principal.Key): the person's or service
// account's that has it as an alias, else key itself.
func (d *Directory) KeyOf(key string) string {
	if d != nil {
		if p := d.byKey[key]; p != nil {
			return "person:" + p.ID
		}
		if s := d.serviceKey[key]; s != nil {
			return "service:" + s.ID
		}
	}
	return key
}

// Group returns the named group.
func (d *Directory) Group(name string) (*Group, bool) {
	if d == nil {
		return nil, false
	}
	g, ok := d.groups[name]
	return g, ok
}

// Lookup returns who a principal is: a person (by any alias), a service
// account, or, without a directory entry, the principal itself.
func (d *Directory) Lookup(p Principal) Subject {
	s := Subject{Principal: p}
	if d != nil && !p.IsZero() {
		s.Person = d.byKey[p.Key()]
		s.Service = d.serviceKey[p.Key()]
	}
	return s
}

// Subject is who a principal is.
type Subject struct {
	// Principal is the name it was looked up by (for the audit).
	Principal Principal
	// Person is set when the principal is an alias of a directory person.
	Person *Person
	// Service is set when the principal is a service account's alias.
	Service *ServiceAccount
}

// Key identifies the subject when counting persons: "person:<id>",
// "service:<id>", or the principal's key without a directory entry. The
// zero Subject has key "", which equals no other key.
func (s Subject) Key() string {
	switch {
	case s.Person != nil:
		return "person:" + s.Person.ID
	case s.Service != nil:
		return "service:" + s.Service.ID
	}
	return s.Principal.Key()
}

// Same reports whether two subjects are the same person (or the same
// service account or bare principal). Zero subjects are the same as nothing.
func (s Subject) Same(o Subject) bool {
	k := s.Key()
	return k != "" && k == o.Key()
}

// IsServiceAccount reports whether the subject is a service account.
func (s Subject) IsServiceAccount() bool { return s.Service != nil }

// String describes the subject for messages and the audit: the principal
// as named, with the person's id when it is a directory person.
func (s Subject) String() string {
	switch {
	case s.Person != nil && s.Person.ID != s.Principal.String():
		return s.Principal.String() + " (person " + s.Person.ID + ")"
	case s.Service != nil:
		return s.Principal.String() + " (service account " + s.Service.ID + ")"
	}
	return s.Principal.String()
}

// IsGroupEntry reports whether an approver entry names a group.
func IsGroupEntry(entry string) bool { return strings.HasPrefix(entry, GroupPrefix) }
