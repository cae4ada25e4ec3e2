package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"
)

// getRun is GET /runs/{id} as who, with the If-None-Match field values
// given (none: no header), in Headers (one value) or MultiValueHeaders
// (several, as API Gateway passes a repeated header).
func getRun(id, who string, inm ...string) events.APIGatewayProxyRequest {
	r := req("GET", "/runs/"+id, who, "")
	switch len(inm) {
	case 0:
	case 1:
		r.Headers["If-None-Match"] = inm[0]
	default:
		r.Headers["If-None-Match"] = inm[len(inm)-1]
		r.MultiValueHeaders = map[string][]string{"If-None-Match": inm}
	}
	return r
}

// tagOf is the entity tag the API promises for a body: the first 16
// bytes of its SHA-256, hex, quoted.
func tagOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// requireNotModified checks a 304: the tag, Cache-Control as on a 200, no
// body and nothing that describes one.
func requireNotModified(t *testing.T, resp events.APIGatewayProxyResponse, tag, msg string) {
	t.Helper()
	require.Equal(t, 304, resp.StatusCode, "%s: %s", msg, resp.Body)
	require.Equal(t, tag, resp.Headers["ETag"], msg)
	require.Equal(t, "no-store", resp.Headers["Cache-Control"], msg)
	require.Empty(t, resp.Body, msg)
	require.NotContains(t, resp.Headers, "Content-Type", msg)
	require.Empty(t, resp.MultiValueHeaders, msg)
}

// TestGetRunAnswersNotModified: GET /runs/{id} tags its body (ETag, the
// hash of the bytes sent); If-None-Match listing that tag, weak or strong,
// alone, in a list or over several header lines, or "*", gets 304 without
// a body; another tag, or a malformed field, gets the run.
func TestGetRunAnswersNotModified(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()

	first := f.handle(getRun(r.ID, alice))
	require.Equal(t, 200, first.StatusCode, first.Body)
	tag := first.Headers["ETag"]
	require.Equal(t, tagOf(first.Body), tag, "the tag is the hash of the body sent")
	require.Equal(t, tag, f.handle(getRun(r.ID, alice)).Headers["ETag"], "an unchanged run keeps its tag")
	opaque := tag[1 : len(tag)-1]

	for _, tt := range []struct {
		name string
		req  events.APIGatewayProxyRequest
	}{
		{"the tag", getRun(r.ID, alice, tag)},
		{"weak", getRun(r.ID, alice, "W/"+tag)},
		{"in a list", getRun(r.ID, alice, `"0123", W/"x,y"`+" ,\t"+tag+`, "z"`)},
		{"empty list elements", getRun(r.ID, alice, " , ,"+tag+",,")},
		{"over two header lines", getRun(r.ID, alice, `"0123"`, tag)},
		{"over two header lines, the first matching", getRun(r.ID, alice, tag, `"0123"`)},
		{"star", getRun(r.ID, alice, "*")},
		{"star with white space", getRun(r.ID, alice, " * ")},
		{"lowercase name", func() events.APIGatewayProxyRequest {
			q := getRun(r.ID, alice)
			q.Headers["if-none-match"] = tag
			return q
		}()},
		{"lowercase name, multi-value only", func() events.APIGatewayProxyRequest {
			q := getRun(r.ID, alice)
			q.MultiValueHeaders = map[string][]string{"if-none-match": {`"0123"`, tag}}
			return q
		}()},
	} {
		t.Run("match/"+tt.name, func(t *testing.T) {
			requireNotModified(t, f.handle(tt.req), tag, tt.name)
		})
	}

	for _, tt := range []struct{ name, inm string }{
		{"another tag", `"0123456789abcdef0123456789abcdef"`},
		{"empty", ""},
		{"only commas", " , "},
		{"the tag unquoted", opaque},
		{"lowercase w/", "w/" + tag},
		{"star in a list", "*, " + tag},
		{"no closing quote", `"` + opaque},
		{"a space in the tag", `"` + opaque[:4] + " " + opaque[4:] + `"`},
		{"a malformed element after the tag", tag + `, x`},
		{"no comma between tags", tag + ` "0123"`},
		{"a parameter", tag + `;q=1`},
		{"a control character", `"` + opaque + "\x01" + `"`},
		{"the tag with another prefix", `X/` + tag},
	} {
		t.Run("no match/"+tt.name, func(t *testing.T) {
			resp := f.handle(getRun(r.ID, alice, tt.inm))
			require.Equal(t, 200, resp.StatusCode, "%q: %s", tt.inm, resp.Body)
			require.Equal(t, first.Body, resp.Body)
			require.Equal(t, tag, resp.Headers["ETag"])
		})
	}
	t.Run("no match/two lines, one malformed", func(t *testing.T) {
		resp := f.handle(getRun(r.ID, alice, tag, "x"))
		require.Equal(t, 200, resp.StatusCode, resp.Body)
	})

	// The run moves on: the tag the caller has no longer matches.
	status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
	require.Equal(t, 202, status, out)
	moved := f.handle(getRun(r.ID, alice, tag))
	require.Equal(t, 200, moved.StatusCode, "a run that changed is sent again: %s", moved.Body)
	require.NotEqual(t, tag, moved.Headers["ETag"])
	require.Equal(t, tagOf(moved.Body), moved.Headers["ETag"])
	requireNotModified(t, f.handle(getRun(r.ID, alice, moved.Headers["ETag"])), moved.Headers["ETag"], "the new tag")
}

// TestGetRunNotModifiedOnlyForWhoMayReadIt: the access check comes first:
// a caller without credentials, one who may not read the run and a caller
// of an unknown run get what they get without If-None-Match (401, 403,
// 404), whatever tag they send, "*" included, and no tag.
func TestGetRunNotModifiedOnlyForWhoMayReadIt(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	tag := f.handle(getRun(r.ID, alice)).Headers["ETag"]
	for _, inm := range []string{tag, "*"} {
		for _, tt := range []struct {
			name, id, who string
			want          int
		}{
			{"unauthenticated", r.ID, "", 401},
			{"not a party", r.ID, carol, 403},
			{"unknown run", "nope", alice, 404},
		} {
			resp := f.handle(getRun(tt.id, tt.who, inm))
			require.Equal(t, tt.want, resp.StatusCode, "%s, If-None-Match %s: %s", tt.name, inm, resp.Body)
			require.NotContains(t, resp.Headers, "ETag", tt.name)
			require.NotEmpty(t, resp.Body, tt.name)
		}
	}
	// A malformed query is refused before the condition too.
	bad := getRun(r.ID, alice, tag)
	bad.QueryStringParameters = map[string]string{"after_version": "x"}
	require.Equal(t, 400, f.handle(bad).StatusCode)
}

// TestGetRunTagIsEachCallersBody: each caller's tag is the hash of the
// body that caller was sent (the view may differ by caller: initiator,
// approver), so two callers share a tag exactly when they were sent the
// same bytes, and each gets 304 for their own.
func TestGetRunTagIsEachCallersBody(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	bodies := map[string]string{}
	for _, who := range []string{alice, bob} {
		resp := f.handle(getRun(r.ID, who))
		require.Equal(t, 200, resp.StatusCode, "%s: %s", who, resp.Body)
		require.Equal(t, tagOf(resp.Body), resp.Headers["ETag"], who)
		requireNotModified(t, f.handle(getRun(r.ID, who, resp.Headers["ETag"])), resp.Headers["ETag"], who)
		bodies[who] = resp.Body
	}
	aliceTag, bobTag := tagOf(bodies[alice]), tagOf(bodies[bob])
	require.Equal(t, bodies[alice] == bodies[bob], aliceTag == bobTag)
	crossed := f.handle(getRun(r.ID, bob, aliceTag))
	if bodies[alice] == bodies[bob] {
		requireNotModified(t, crossed, bobTag, "the same bytes: the same tag")
	} else {
		require.Equal(t, 200, crossed.StatusCode, "another caller's view is another representation")
	}
}

// TestGetRunWaitsBeforeItCompares: with after_version and wait the
// comparison is made with the run as the wait leaves it: a write during
// the wait is sent (200, the new tag) to a caller who sent the old tag;
// a wait that ends with the run unchanged is 304.
func TestGetRunWaitsBeforeItCompares(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	tag := f.handle(getRun(r.ID, alice)).Headers["ETag"]
	waiting := func() events.APIGatewayProxyRequest {
		q := getRun(r.ID, alice, tag)
		q.QueryStringParameters = map[string]string{"after_version": fmt.Sprint(r.Version), "wait": "20"}
		return q
	}

	f.api.MaxWait = time.Millisecond
	requireNotModified(t, f.handle(waiting()), tag, "a wait that ended with the run unchanged")

	f.api.MaxWait = time.Minute
	got := make(chan events.APIGatewayProxyResponse, 1)
	go func() {
		resp, err := f.api.Handle(t.Context(), waiting())
		if err != nil {
			resp.Body = err.Error()
		}
		got <- resp
	}()
	for f.store.Waiters(r.ID) == 0 {
		select {
		case resp := <-got:
			t.Fatalf("answered before it waited: %d %s", resp.StatusCode, resp.Body)
		case <-time.After(time.Millisecond):
		}
	}
	status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
	require.Equal(t, 202, status, out)
	resp := <-got
	require.Equal(t, 200, resp.StatusCode, "the write during the wait is sent: %s", resp.Body)
	require.NotEqual(t, tag, resp.Headers["ETag"])
	require.Equal(t, tagOf(resp.Body), resp.Headers["ETag"])
}

// TestGetRunNotModifiedFromAPIGatewayEvent: a client that sent
// If-None-Match on two lines reaches the function as API Gateway passes
// it: the last line in headers, both in multiValueHeaders. Every line
// counts, so the tag on the first line matches.
func TestGetRunNotModifiedFromAPIGatewayEvent(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	tag := f.handle(loadEvent(t, "get-run-iam.json", "RUNID", r.ID)).Headers["ETag"]
	require.NotEmpty(t, tag)
	ev := loadEvent(t, "get-run-if-none-match-iam.json", "RUNID", r.ID, "ETAG", strings.ReplaceAll(tag, `"`, `\"`))
	requireNotModified(t, f.handle(ev), tag, "a tag on the first of two lines")

	other := loadEvent(t, "get-run-if-none-match-iam.json", "RUNID", r.ID, "ETAG", `\"0123\"`)
	resp := f.handle(other)
	require.Equal(t, 200, resp.StatusCode, resp.Body)
	require.Equal(t, tag, resp.Headers["ETag"])
}

// BenchmarkGetRunConditional measures GET /runs/{id} of a run waiting for
// approval through the handler: answered with the run (200) and answered
// 304 to If-None-Match. The handler builds, encodes and hashes the body
// either way; the 304 saves its bytes on the wire (body-bytes) and the
// caller's decoding.
func BenchmarkGetRunConditional(b *testing.B) {
	f := buildFixture(b, b.TempDir(), script, nil)
	ctx := b.Context()
	resp, err := f.api.Handle(ctx, req("POST", "/runs", alice, `{"prompt":"update pricing","approvers":["`+bob+`","ops@example.com"]}`))
	require.NoError(b, err)
	require.Equal(b, 202, resp.StatusCode, resp.Body)
	for len(f.jobs) > 0 {
		j := f.jobs[0]
		f.jobs = f.jobs[1:]
		require.NoError(b, f.worker.Handle(ctx, j))
	}
	var started struct{ ID string }
	require.NoError(b, json.Unmarshal([]byte(resp.Body), &started))
	first, err := f.api.Handle(ctx, getRun(started.ID, alice))
	require.NoError(b, err)
	require.Equal(b, 200, first.StatusCode, first.Body)
	for _, bc := range []struct {
		name string
		req  events.APIGatewayProxyRequest
		want int
	}{
		{"200", getRun(started.ID, alice), 200},
		{"304", getRun(started.ID, alice, first.Headers["ETag"]), 304},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sent int
			for b.Loop() {
				resp, err := f.api.Handle(ctx, bc.req)
				if err != nil || resp.StatusCode != bc.want {
					b.Fatalf("%d %v: %s", resp.StatusCode, err, resp.Body)
				}
				sent = len(resp.Body)
			}
			b.ReportMetric(float64(sent), "body-bytes")
		})
	}
}
