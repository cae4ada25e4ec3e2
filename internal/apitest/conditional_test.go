package apitest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
)

// ifNoneMatch returns a copy of c that sends If-None-Match, one header
// line per value.
func ifNoneMatch(c *apitest.Caller, values ...string) *apitest.Caller {
	cc := *c
	cc.Header = http.Header{"If-None-Match": values}
	return &cc
}

// requireNotModified fails t unless r is a 304 with tag, Cache-Control as
// on a 200, and no body or Content-Type.
func requireNotModified(t *testing.T, r apitest.Response, tag, msg string) {
	t.Helper()
	if r.Status != http.StatusNotModified || r.Header.Get("ETag") != tag || r.Header.Get("Cache-Control") != "no-store" ||
		len(r.Body) != 0 || r.Header.Get("Content-Type") != "" {
		t.Fatalf("%s: got %d ETag %q Cache-Control %q Content-Type %q body %q, want 304 with ETag %s, no-store and no body",
			msg, r.Status, r.Header.Get("ETag"), r.Header.Get("Cache-Control"), r.Header.Get("Content-Type"), r.Body, tag)
	}
}

// TestConditionalGetOverHTTP: GET /runs/{id} through the local server's
// gateway over HTTP tags the run and answers a request whose
// If-None-Match lists the tag (on one line or several, weak or strong)
// 304 without a body, after the access check and after a wait; the tag
// moves when the run does.
func TestConditionalGetOverHTTP(t *testing.T) { runConditionalGet(t, nil) }

func runConditionalGet(t *testing.T, store func(*apitest.Options)) {
	var o apitest.Options
	if store != nil {
		store(&o)
	}
	s := start(t, o)
	alice, bob := s.As(t, "alice"), s.As(t, "bob")
	started := alice.Call(t, "POST", "/runs", jsonCT, `{"prompt":"update pricing","approvers":["bob"]}`)
	id := runID(t, started)
	var waiting struct {
		Version int64 `json:"version"`
		Pending struct {
			TurnDigest string `json:"turn_digest"`
		} `json:"pending"`
	}
	alice.WaitStatus(t, id, "WAITING_FOR_APPROVAL", &waiting)
	path := "/runs/" + id

	first := alice.Call(t, "GET", path, "", "")
	tag := first.Header.Get("ETag")
	sum := sha256.Sum256(first.Body)
	if want := `"` + hex.EncodeToString(sum[:16]) + `"`; first.Status != 200 || tag != want {
		t.Fatalf("GET: %d ETag %q, want 200 with the body's tag %s", first.Status, tag, want)
	}
	if again := alice.Call(t, "GET", path, "", ""); again.Header.Get("ETag") != tag || string(again.Body) != string(first.Body) {
		t.Fatalf("an unchanged run read again: ETag %q body %s, want %s and the same body", again.Header.Get("ETag"), again.Body, tag)
	}

	requireNotModified(t, ifNoneMatch(alice, tag).Call(t, "GET", path, "", ""), tag, "the tag")
	requireNotModified(t, ifNoneMatch(alice, "W/"+tag).Call(t, "GET", path, "", ""), tag, "the tag, weak")
	requireNotModified(t, ifNoneMatch(alice, `"0123", `+tag).Call(t, "GET", path, "", ""), tag, "a list")
	requireNotModified(t, ifNoneMatch(alice, tag, `"0123"`).Call(t, "GET", path, "", ""), tag, "the first of two lines")
	requireNotModified(t, ifNoneMatch(alice, "*").Call(t, "GET", path, "", ""), tag, "*")
	for _, malformed := range []string{tag[1 : len(tag)-1], "w/" + tag, "*, " + tag} {
		r := ifNoneMatch(alice, malformed).Call(t, "GET", path, "", "")
		if r.Status != 200 || r.Header.Get("ETag") != tag || string(r.Body) != string(first.Body) {
			t.Errorf("If-None-Match %s (malformed): %d %s, want the run", malformed, r.Status, r.Body)
		}
	}

	// The access check comes first.
	for _, tt := range []struct {
		name   string
		caller *apitest.Caller
		path   string
		want   int
	}{
		{"no token", s.As(t, ""), path, 401},
		{"not a party", s.As(t, "carol"), path, 403},
		{"unknown run", alice, "/runs/nope", 404},
	} {
		for _, inm := range []string{tag, "*"} {
			if r := ifNoneMatch(tt.caller, inm).Call(t, "GET", tt.path, "", ""); r.Status != tt.want || r.Header.Get("ETag") != "" {
				t.Errorf("%s, If-None-Match %s: %d ETag %q, want %d without a tag", tt.name, inm, r.Status, r.Header.Get("ETag"), tt.want)
			}
		}
	}

	// Each caller's tag is the hash of the body it is sent.
	bobs := bob.Call(t, "GET", path, "", "")
	bobSum := sha256.Sum256(bobs.Body)
	if bobTag := bobs.Header.Get("ETag"); bobTag != `"`+hex.EncodeToString(bobSum[:16])+`"` || (bobTag == tag) != (string(bobs.Body) == string(first.Body)) {
		t.Errorf("the approver's tag %q is not the hash of the body it was sent", bobTag)
	}
	requireNotModified(t, ifNoneMatch(bob, bobs.Header.Get("ETag")).Call(t, "GET", path, "", ""), bobs.Header.Get("ETag"), "the approver's own tag")

	// A wait that ends with the run unchanged, then the comparison.
	held := fmt.Sprintf("%s?after_version=%d&wait=1", path, waiting.Version)
	requireNotModified(t, ifNoneMatch(alice, tag).Call(t, "GET", held, "", ""), tag, "after a wait")

	// The run moves on: the old tag no longer matches.
	bob.Do(t, "POST", path+"/decision", map[string]string{"turn_digest": waiting.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	alice.WaitStatus(t, id, "COMPLETED", nil)
	done := ifNoneMatch(alice, tag).Call(t, "GET", path, "", "")
	if done.Status != 200 || done.Header.Get("ETag") == tag || done.Header.Get("ETag") == "" {
		t.Fatalf("the run moved on: %d ETag %q, want 200 with a new tag", done.Status, done.Header.Get("ETag"))
	}
	requireNotModified(t, ifNoneMatch(alice, done.Header.Get("ETag")).Call(t, "GET", path, "", ""), done.Header.Get("ETag"), "the new tag")
}
