package httpapi_test

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/routes"
)

// TestRoutingFollowsTheTable: the handler serves every route of its
// functions in the table (none answers "no route" or 405), refuses an
// unauthenticated caller on every authenticated route, answers 405 with
// the table's methods of a known path, and a handler built for one function
// serves none of the other's routes.
func TestRoutingFollowsTheTable(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	for _, rt := range routes.All().ServedBy(routes.StartRun, routes.Resume) {
		t.Run(rt.String(), func(t *testing.T) {
			path := strings.NewReplacer("{id}", r.ID, "{token}", strings.Repeat("A", 43)).Replace(rt.Path)
			status, out := f.call(req(rt.Method, path, "", ""))
			switch {
			case rt.Authenticated:
				if status != 401 {
					t.Errorf("unauthenticated: %d %v, want 401", status, out)
				}
			default: // a link route: its handler answers an HTML page
				resp := f.handle(req(rt.Method, path, "", ""))
				if status == 405 || !strings.HasPrefix(resp.Headers["Content-Type"], "text/html") {
					t.Errorf("link route: %d %q, want its handler's HTML page", status, resp.Headers["Content-Type"])
				}
			}
			if rt.Authenticated {
				status, out = f.call(req(rt.Method, path, carol, ""))
				if status == 405 || strings.HasPrefix(errorMessage(out), "no route") {
					t.Errorf("%d %v: not routed", status, out)
				}
			}
		})
	}
	for _, tt := range []struct{ method, path, allow string }{
		{"GET", "/runs", "POST"},
		{"DELETE", "/runs/" + r.ID, "GET"},
		{"POST", "/runs/" + r.ID + "/events", "GET"},
		{"GET", "/runs/" + r.ID + "/decision", "POST"},
		{"GET", "/runs/" + r.ID + "/cancel", "POST"},
		{"POST", "/approvals", "GET"},
	} {
		resp := f.handle(req(tt.method, tt.path, carol, ""))
		if resp.StatusCode != 405 || resp.Headers["Allow"] != tt.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tt.method, tt.path, resp.StatusCode, resp.Headers["Allow"], tt.allow)
		}
	}
	f.api.Routes = routes.All().ServedBy(routes.StartRun)
	if status, out := f.call(req("GET", "/runs/"+r.ID, bob, "")); status != 404 {
		t.Errorf("startrun handler on GET /runs/{id}: %d %v, want 404", status, out)
	}
	f.api.Routes = routes.All().ServedBy(routes.Resume)
	if status, out := f.call(req("POST", "/runs", alice, `{"prompt":"x"}`)); status != 404 {
		t.Errorf("resume handler on POST /runs: %d %v, want 404", status, out)
	}
}

// errorMessage is the message of an error body, "" for another body.
func errorMessage(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}
