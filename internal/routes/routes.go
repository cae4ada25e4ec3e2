package routes

import (
	"net/url"
	"slices"
	"strings"
)

// Function names what serves a route.
type Function string

// The functions that serve routes.
const (
	// StartRun is the startrun Lambda function (POST /runs).
	StartRun Function = "startrun"
	// Resume is the resume Lambda function (the rest of the API).
	Resume Function = "resume"
	// Local is the local gateway itself (agentgate serve); never deployed.
	Local Function = "local"
)

// The operations of the API: openapi.yaml's operationIds.
const (
	OpStartRun    = "startRun"
	OpGetRun      = "getRun"
	OpListEvents  = "listEvents"
	OpGetHeldCall = "getHeldCall"
	OpDecide      = "decide"
	OpCancel      = "cancel"
	// OpSubmitToolResults: POST /runs/{id}/tool-results (issue #13).
	OpSubmitToolResults = "submitToolResults"
	OpListApprovals     = "listPendingApprovals"
	OpApprovalPage      = "approvalPage"
	OpApprovalPageHead  = "approvalPageHead"
	OpApprovalDecide    = "approvalDecide"
	OpHealth            = "health"
)

// Route is one method of one path of the API.
type Route struct {
	// Method is upper case (GET, POST...).
	Method string
	// Path is the template: literal segments and {name} parameters
	// (/runs/{id}/events).
	Path string
	// Operation is the operationId of the route in openapi.yaml; the API
	// handler keys its handlers by it.
	Operation string
	// Function serves the route.
	Function Function
	// Authenticated routes need an authenticated caller: AWS_IAM (SigV4)
	// on the deployed REST API, a bearer token on the local server. The
	// approval-link routes are not: the token in their path is the
	// credential, checked by the handler.
	Authenticated bool
	// MaxBody is the largest body in bytes the route's handler reads; 0:
	// the route takes no body.
	MaxBody int
	// LocalOnly routes are served by agentgate serve but not by the
	// deployed REST API.
	LocalOnly bool
}

// String is "METHOD /path".
func (r Route) String() string { return r.Method + " " + r.Path }

// Body limits of the handlers, in bytes.
const (
	// MaxStartBody caps POST /runs.
	MaxStartBody = 256 << 10
	// MaxDecisionBody caps POST /runs/{id}/decision.
	MaxDecisionBody = 64 << 10
	// MaxCancelBody caps POST /runs/{id}/cancel (no body, or {}).
	MaxCancelBody = 1 << 10
	// MaxFormBody caps the approval page's form (POST /approvals/{token}):
	// as large as a decision through the API, so a reason typed to the
	// form's 2000-character limit fits even in four-byte characters sent
	// percent-encoded (24 KiB), with another call's beside it.
	MaxFormBody = 64 << 10
	// MaxToolResultsBody caps POST /runs/{id}/tool-results; the contents of
	// the results are bounded further (runs.MaxToolResultSize each,
	// runs.MaxToolResultsSize together).
	MaxToolResultsBody = 2 << 20
)

// Table is a list of routes.
type Table []Route

// All returns the API's routes (a fresh copy), sorted by path, then method.
func All() Table {
	return Table{
		{Method: "GET", Path: "/approvals", Operation: OpListApprovals, Function: Resume, Authenticated: true},
		{Method: "GET", Path: "/approvals/{token}", Operation: OpApprovalPage, Function: Resume},
		{Method: "HEAD", Path: "/approvals/{token}", Operation: OpApprovalPageHead, Function: Resume, LocalOnly: true},
		{Method: "POST", Path: "/approvals/{token}", Operation: OpApprovalDecide, Function: Resume, MaxBody: MaxFormBody},
		{Method: "GET", Path: "/healthz", Operation: OpHealth, Function: Local, LocalOnly: true},
		{Method: "POST", Path: "/runs", Operation: OpStartRun, Function: StartRun, Authenticated: true, MaxBody: MaxStartBody},
		{Method: "GET", Path: "/runs/{id}", Operation: OpGetRun, Function: Resume, Authenticated: true},
		{Method: "GET", Path: "/runs/{id}/calls/{call_id}", Operation: OpGetHeldCall, Function: Resume, Authenticated: true},
		{Method: "POST", Path: "/runs/{id}/cancel", Operation: OpCancel, Function: Resume, Authenticated: true, MaxBody: MaxCancelBody},
		{Method: "POST", Path: "/runs/{id}/decision", Operation: OpDecide, Function: Resume, Authenticated: true, MaxBody: MaxDecisionBody},
		{Method: "POST", Path: "/runs/{id}/tool-results", Operation: OpSubmitToolResults, Function: Resume, Authenticated: true, MaxBody: MaxToolResultsBody},
		{Method: "GET", Path: "/runs/{id}/events", Operation: OpListEvents, Function: Resume, Authenticated: true},
	}
}

// Deployed returns the routes of the deployed REST API: All without the
// local-only ones.
func Deployed() Table {
	return All().Filter(func(r Route) bool { return !r.LocalOnly })
}

// Filter returns the routes keep accepts, in order.
func (t Table) Filter(keep func(Route) bool) Table {
	var out Table
	for _, r := range t {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// ServedBy returns the routes served by one of fns.
func (t Table) ServedBy(fns ...Function) Table {
	return t.Filter(func(r Route) bool { return slices.Contains(fns, r.Function) })
}

// Match is a request path found in a table.
type Match struct {
	// Route is the route of the request's method; when the path is known
	// but the method is not (Allowed false), the path's first route, which
	// says the function and authentication of the path.
	Route Route
	// Allowed is false when no route of the path has the request's method.
	Allowed bool
	// Allow lists the methods of the path, in table order.
	Allow []string
	// Params are the path's parameters by name ({id} -> "id").
	Params map[string]string
}

// Lookup finds method and path (the request's path) in t; ok is false when
// no route has that path. The path must be spelled as the routes are: a
// leading slash, no trailing one, no empty segment (/runs/, //runs and
// /runs//x are no route's, as the spec's paths are not).
func (t Table) Lookup(method, path string) (m Match, ok bool) {
	rest, abs := strings.CutPrefix(path, "/")
	if !abs {
		return m, false
	}
	segs := strings.Split(rest, "/")
	return t.lookup(method, func(r Route) (map[string]string, bool) { return matchPath(r.Path, segs) })
}

// LookupEscaped is Lookup for a path as sent, percent-escapes and all
// (url.URL.EscapedPath): it splits the path at its slashes, then unescapes
// each segment, so a parameter may hold an escaped slash (a call id
// "a/b" sent as a%2Fb), as API Gateway's matching allows. A segment that
// does not unescape is no route's.
func (t Table) LookupEscaped(method, escaped string) (m Match, ok bool) {
	rest, abs := strings.CutPrefix(escaped, "/")
	if !abs {
		return m, false
	}
	segs := strings.Split(rest, "/")
	for i, seg := range segs {
		u, err := url.PathUnescape(seg)
		if err != nil {
			return m, false
		}
		segs[i] = u
	}
	return t.lookup(method, func(r Route) (map[string]string, bool) { return matchPath(r.Path, segs) })
}

// LookupResource finds method and a route's own template (API Gateway's
// resource, such as /runs/{id}) in t: what the deployed REST API matched,
// whatever base path a custom domain puts in front of the request's path.
// The match has no Params: the event's pathParameters hold them.
func (t Table) LookupResource(method, resource string) (m Match, ok bool) {
	return t.lookup(method, func(r Route) (map[string]string, bool) { return nil, r.Path == resource })
}

func (t Table) lookup(method string, match func(Route) (map[string]string, bool)) (m Match, ok bool) {
	for _, r := range t {
		params, same := match(r)
		if !same {
			continue
		}
		if !ok {
			m, ok = Match{Route: r, Params: params}, true
		}
		m.Allow = append(m.Allow, r.Method)
		if r.Method == method && !m.Allowed {
			m.Route, m.Allowed = r, true
		}
	}
	return m, ok
}

// matchPath matches a template against the segments of a path: a literal
// segment must be equal, a {name} segment takes any non-empty segment. It
// allocates only for a match that has parameters: every request is looked
// up in the whole table, and most templates do not match it.
func matchPath(template string, segs []string) (map[string]string, bool) {
	if !eachTemplateSegment(template, segs, func(string, string) {}) {
		return nil, false
	}
	params := map[string]string{}
	eachTemplateSegment(template, segs, func(name, seg string) { params[name] = seg })
	return params, true
}

// eachTemplateSegment reports whether template matches segs, calling param
// with each {name} parameter and the segment it takes while they match.
func eachTemplateSegment(template string, segs []string, param func(name, seg string)) bool {
	rest := strings.Trim(template, "/")
	for i, seg := range segs {
		if i > 0 && rest == "" {
			return false // the template has fewer segments
		}
		var ts string
		ts, rest, _ = strings.Cut(rest, "/")
		if name, ok := strings.CutPrefix(ts, "{"); ok {
			if seg == "" {
				return false
			}
			param(strings.TrimSuffix(name, "}"), seg)
			continue
		}
		if ts != seg {
			return false
		}
	}
	return rest == "" // else the template has more segments
}

// Params lists the {name} parameters of a path template, in order.
func Params(template string) []string {
	var out []string
	for _, seg := range strings.Split(template, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}
