package routes

import (
	"maps"
	"slices"
	"testing"
)

func TestTableIsConsistent(t *testing.T) {
	seen, ops := map[string]bool{}, map[string]bool{}
	for _, r := range All() {
		if seen[r.String()] {
			t.Errorf("%s is in the table twice", r)
		}
		seen[r.String()] = true
		if ops[r.Operation] || r.Operation == "" {
			t.Errorf("%s: operation %q is empty or not unique", r, r.Operation)
		}
		ops[r.Operation] = true
		if r.Function != StartRun && r.Function != Resume && r.Function != Local {
			t.Errorf("%s: unknown function %q", r, r.Function)
		}
		if r.Function == Local && !r.LocalOnly {
			t.Errorf("%s: served by the local gateway but not local-only", r)
		}
		if r.MaxBody > 0 && r.Method != "POST" {
			t.Errorf("%s: a body limit on a method without a body", r)
		}
	}
	if got := len(Deployed()); got != len(All())-2 {
		t.Errorf("Deployed has %d routes, want All without HEAD /approvals/{token} and GET /healthz", got)
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		method, path string
		found        bool
		allowed      bool
		op           string
		allow        []string
		params       map[string]string
	}{
		{"POST", "/runs", true, true, OpStartRun, []string{"POST"}, map[string]string{}},
		{"POST", "/runs/", false, false, "", nil, nil},
		{"POST", "//runs", false, false, "", nil, nil},
		{"POST", "runs", false, false, "", nil, nil},
		{"GET", "/healthz/", false, false, "", nil, nil},
		{"GET", "/runs/r1/", false, false, "", nil, nil},
		{"GET", "/runs", true, false, OpStartRun, []string{"POST"}, map[string]string{}},
		{"GET", "/runs/r1", true, true, OpGetRun, []string{"GET"}, map[string]string{"id": "r1"}},
		{"DELETE", "/runs/r1", true, false, OpGetRun, []string{"GET"}, map[string]string{"id": "r1"}},
		{"GET", "/runs/r1/events", true, true, OpListEvents, []string{"GET"}, map[string]string{"id": "r1"}},
		{"POST", "/runs/r1/decision", true, true, OpDecide, []string{"POST"}, map[string]string{"id": "r1"}},
		{"GET", "/runs/r1/cancel", true, false, OpCancel, []string{"POST"}, map[string]string{"id": "r1"}},
		{"GET", "/approvals", true, true, OpListApprovals, []string{"GET"}, map[string]string{}},
		{"HEAD", "/approvals/tok", true, true, OpApprovalPageHead, []string{"GET", "HEAD", "POST"}, map[string]string{"token": "tok"}},
		{"PUT", "/approvals/tok", true, false, OpApprovalPage, []string{"GET", "HEAD", "POST"}, map[string]string{"token": "tok"}},
		{"GET", "/runs/r1/calls/c1", true, true, OpGetHeldCall, []string{"GET"}, map[string]string{"id": "r1", "call_id": "c1"}},
		{"GET", "/runs/r1/calls", false, false, "", nil, nil},
		{"GET", "/runs/r1/calls/c1/x", false, false, "", nil, nil},
		{"GET", "/runs/r1/calls/", false, false, "", nil, nil},
		{"GET", "/runs/r1/other", false, false, "", nil, nil},
		{"GET", "/runs//events", false, false, "", nil, nil},
		{"GET", "/runs/r1/events/x", false, false, "", nil, nil},
		{"GET", "/", false, false, "", nil, nil},
		{"GET", "/approvals/a/b", false, false, "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			m, ok := All().Lookup(tt.method, tt.path)
			if !ok {
				m.Params = nil
			}
			if ok != tt.found || m.Allowed != tt.allowed || m.Route.Operation != tt.op ||
				!slices.Equal(m.Allow, tt.allow) || !maps.Equal(m.Params, tt.params) {
				t.Errorf("got found=%v %+v, want found=%v allowed=%v op=%q allow=%v params=%v",
					ok, m, tt.found, tt.allowed, tt.op, tt.allow, tt.params)
			}
		})
	}
}

func TestServedBy(t *testing.T) {
	start := All().ServedBy(StartRun)
	if len(start) != 1 || start[0].Operation != OpStartRun {
		t.Errorf("startrun serves %v, want only POST /runs", start)
	}
	if _, ok := start.Lookup("GET", "/runs/r1"); ok {
		t.Error("the startrun table knows /runs/{id}")
	}
	for _, r := range All().ServedBy(Resume) {
		if r.Function != Resume {
			t.Errorf("%s is served by %s", r, r.Function)
		}
	}
}

func TestParams(t *testing.T) {
	if got := Params("/runs/{id}/events"); !slices.Equal(got, []string{"id"}) {
		t.Errorf("got %v", got)
	}
	if got := Params("/runs"); got != nil {
		t.Errorf("got %v", got)
	}
}

func TestLookupResource(t *testing.T) {
	m, ok := All().LookupResource("POST", "/runs/{id}/decision")
	if !ok || !m.Allowed || m.Route.Operation != OpDecide || m.Params != nil {
		t.Errorf("got %v %+v", ok, m)
	}
	m, ok = All().LookupResource("GET", "/runs/{id}/decision")
	if !ok || m.Allowed || !slices.Equal(m.Allow, []string{"POST"}) {
		t.Errorf("got %v %+v", ok, m)
	}
	if _, ok := All().LookupResource("GET", "/runs/r1"); ok {
		t.Error("a path is not a resource")
	}
}

func TestLookupEscaped(t *testing.T) {
	m, ok := All().LookupEscaped("GET", "/runs/r1/calls/a%2Fb%20c")
	if !ok || !m.Allowed || m.Route.Operation != OpGetHeldCall || m.Params["call_id"] != "a/b c" || m.Params["id"] != "r1" {
		t.Errorf("got %v %+v", ok, m)
	}
	if _, ok := All().LookupEscaped("GET", "/runs/r1/calls/a/b"); ok {
		t.Error("an unescaped slash separates segments")
	}
	if _, ok := All().LookupEscaped("GET", "/runs/r1/calls/%zz"); ok {
		t.Error("a segment that does not unescape is no route's")
	}
}
