package httpapi

import (
	"bytes"
	"context"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/strictjson"
)

// API holds what the handlers need. Build it once, outside the handler.
type API struct {
	Store    *runs.Store
	Tools    *loop.Toolbox
	Dispatch service.Dispatcher
	// Routes are the routes this handler serves: routes.All() on the local
	// server, the routes of its function on a Lambda
	// (routes.All().ServedBy(routes.StartRun)).
	Routes routes.Table
	// AllowedModels are the model ids a run may ask for (AGENTGATE_ALLOWED_MODELS);
	// empty: runs use the configured model only.
	AllowedModels []string
	// Webhooks, when set, accepts runs' webhook_url under its policy; nil:
	// this deployment does not deliver webhooks and refuses the field.
	Webhooks *WebhookTargets
	// Directory says who is who (persons, groups, service accounts); nil:
	// every principal is only itself, compared canonically.
	Directory *identity.Directory
	// Policy is the deployment policy (nil: no rules): runs may only
	// tighten it.
	Policy *policy.Policy
	// MaxWait bounds how long GET /runs/{id}?after_version=N&wait=S holds
	// a request (at most runs.MaxWait); 0: it answers at once whatever S
	// is (the deployed functions: a held request would hold a Lambda).
	MaxWait time.Duration
	Logger  *slog.Logger
	Now     func() time.Time
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *API) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// Handle serves one API Gateway proxy request. It never returns a Go error:
// every failure is an HTTP response.
func (a *API) Handle(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	var allow []string
	resp, err := a.route(ctx, req, &allow)
	if err != nil {
		code, status, msg := classify(err)
		if status == http.StatusInternalServerError {
			a.log().ErrorContext(ctx, "request failed", "method", req.HTTPMethod, "path", redactPath(req.Path), "err", err)
		}
		resp = jsonResponse(status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
		if status == http.StatusMethodNotAllowed {
			resp.Headers["Allow"] = strings.Join(allow, ", ")
		}
	}
	return resp, nil
}

// route finds the request's route in a.Routes and calls its handler; for a
// known path with another method it sets allow to the path's methods.
func (a *API) route(ctx context.Context, req events.APIGatewayProxyRequest, allow *[]string) (events.APIGatewayProxyResponse, error) {
	// API Gateway names the resource it matched (and its pathParameters):
	// that, not the path, which a custom domain's base path (/v1/runs/…)
	// may lengthen. Events without one (tests, hand-made) go by the path.
	var (
		m  routes.Match
		ok bool
	)
	if req.Resource != "" {
		m, ok = a.Routes.LookupResource(req.HTTPMethod, req.Resource)
	} else {
		m, ok = a.Routes.Lookup(req.HTTPMethod, req.Path)
	}
	if !ok {
		return events.APIGatewayProxyResponse{}, errorf(runs.ENotFound, "no route for %s %s", req.HTTPMethod, redactPath(req.Path))
	}
	if !m.Allowed {
		*allow = m.Allow
		return events.APIGatewayProxyResponse{}, errorf(runs.EMethodNotAllowed, "method %s is not allowed on %s; use %s", req.HTTPMethod, m.Route.Path, strings.Join(m.Allow, ", "))
	}
	if name := repeatedQuery(req); name != "" {
		msg := fmt.Sprintf("query parameter %q is given more than once", name)
		switch m.Route.Operation {
		case routes.OpApprovalPage, routes.OpApprovalPageHead, routes.OpApprovalDecide:
			// A person's browser: the problem page, as every answer there.
			p := page(approvalpage.Problem(http.StatusBadRequest, "The link's address is malformed: "+msg+"."))
			if req.HTTPMethod == http.MethodHead {
				p.Body = ""
			}
			return p, nil
		}
		return events.APIGatewayProxyResponse{}, errorf(runs.EBadRequest, "%s", msg)
	}
	param := func(name string) string {
		if v := req.PathParameters[name]; v != "" {
			return v // API Gateway's own reading of the path
		}
		return m.Params[name]
	}
	switch m.Route.Operation {
	case routes.OpStartRun:
		return a.startRun(ctx, req)
	case routes.OpGetRun:
		return a.getRun(ctx, req, param("id"))
	case routes.OpListEvents:
		return a.listEvents(ctx, req, param("id"))
	case routes.OpGetHeldCall:
		return a.getCall(ctx, req, param("id"), param("call_id"))
	case routes.OpDecide:
		return a.decide(ctx, req, param("id"))
	case routes.OpCancel:
		return a.cancel(ctx, req, param("id"))
	case routes.OpSubmitToolResults:
		return a.submitToolResults(ctx, req, param("id"))
	case routes.OpListApprovals:
		return a.listApprovals(ctx, req)
	case routes.OpApprovalPage, routes.OpApprovalPageHead:
		return a.approvalPage(ctx, req, param("token"))
	case routes.OpApprovalDecide:
		return a.approvalDecide(ctx, req, param("token"))
	}
	return events.APIGatewayProxyResponse{}, errorf(runs.ENotFound, "no route for %s %s", req.HTTPMethod, m.Route.Path)
}

// redactPath hides the token of an approval link: it is a credential.
func redactPath(p string) string {
	if strings.HasPrefix(p, "/approvals/") {
		return "/approvals/{token}"
	}
	return p
}

// Identity returns the authenticated caller: the IAM user ARN (AWS_IAM
// authorization), or the authorizer's principal (the local server's bearer
// token check, or a custom authorizer).
func Identity(req events.APIGatewayProxyRequest) string {
	if arn := req.RequestContext.Identity.UserArn; arn != "" {
		return arn
	}
	if p, ok := req.RequestContext.Authorizer["principalId"].(string); ok && p != "" {
		return p
	}
	return ""
}

func requireIdentity(req events.APIGatewayProxyRequest) (string, error) {
	id := Identity(req)
	if id == "" {
		return "", errorf(runs.EUnauthorized, "authentication required: sign the request (AWS_IAM) or send a bearer token")
	}
	return id, nil
}

// body returns the request body, decoded from base64 when API Gateway says so,
// refusing more than max bytes.
func body(req events.APIGatewayProxyRequest, max int) ([]byte, error) {
	b := []byte(req.Body)
	if req.IsBase64Encoded {
		var err error
		if b, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return nil, errorf(runs.EBadRequest, "body is not valid base64")
		}
	}
	if len(b) > max {
		return nil, errorf(runs.ETooLarge, "body is %d bytes, the limit is %d", len(b), max)
	}
	return b, nil
}

func header(req events.APIGatewayProxyRequest, name string) string {
	// One name in several spellings (content-type and Content-Type, which
	// a hand-made event can hold) is read the same way every time: the
	// spelling first in byte order, not the first in Go's map order.
	found, value := "", ""
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) && (found == "" || k < found) {
			found, value = k, v
		}
	}
	if found != "" {
		return value
	}
	for k, v := range req.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// decodeJSON strictly decodes a JSON body: content type JSON (or absent),
// one value of I-JSON (RFC 7493: valid UTF-8, no lone surrogate escapes, no
// member name twice), every member spelled exactly as v's JSON names (no
// unknown or case-variant names), every value of a kind its field takes
// (decodeStrict: JSON v2's rules, over JSON v2's tokenizer). encoding/json
// alone would take the last of two equal names, match names
// case-insensitively and replace invalid UTF-8, so the value stored could
// differ from what a reader of the body (a proxy, an auditor, another
// parser) saw.
func decodeJSON(req events.APIGatewayProxyRequest, max int, v any) error {
	_, err := decodeJSONGiven(req, max, v)
	return err
}

// decodeJSONGiven is decodeJSON, also returning the members the body gives
// (not null), by JSON pointer ("/results/0/content").
func decodeJSONGiven(req events.APIGatewayProxyRequest, max int, v any) (givenMembers, error) {
	if err := jsonMediaType(req); err != nil {
		return nil, err
	}
	b, err := body(req, max)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errorf(runs.EBadRequest, "body is empty; send a JSON object")
	}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		// JSON's null decodes into a struct as nothing at all; a body must be an object.
		return nil, errorf(runs.EBadRequest, "body is not valid: the body must be a JSON object, not null")
	}
	given, err := decodeStrictGiven(b, v)
	if at, deep := tooDeep(err); deep {
		return nil, errorf(runs.ETooLarge, "body nests too deeply: its JSON goes more than %d levels of objects and arrays deep (at byte %d), the most a body may", MaxJSONDepth, at)
	}
	var re *rangeError
	if errors.As(err, &re) {
		side := "more than the largest"
		if strings.HasPrefix(re.Value, "-") {
			side = "less than the smallest"
		}
		return given, &outOfRangeError{errorf(runs.EInvalid, "field %.80q is out of range: %.40s is %s integer it takes, %s", strictjson.Path(re.Pointer), re.Value, side, re.Bound)}
	}
	if err != nil {
		return nil, errorf(runs.EBadRequest, "body is not valid: %s", jsonProblem(err))
	}
	return given, nil
}

// outOfRangeError is decodeJSONGiven's answer to an integer member written
// as an integer that its type cannot hold (9223372036854775808 for an
// int64): a 422, as any number out of its member's range, not a 400. v is
// filled all the same, the member at its type's bound, so a handler that
// validates v may refuse it with the member's own range instead.
type outOfRangeError struct{ err *runs.Error }

func (e *outOfRangeError) Error() string { return e.err.Error() }
func (e *outOfRangeError) Unwrap() error { return e.err }

// MaxJSONDepth is how many levels of objects and arrays a request body's
// JSON may nest: the limit of the tokenizer bodies are read with
// (jsontext, whose limit is not exported; TestMaxJSONDepth holds the two
// together). Well-formed JSON deeper than that is over a limit (413), not
// malformed.
const MaxJSONDepth = 10000

// tooDeep reports whether err is the tokenizer's refusal of JSON nested
// deeper than MaxJSONDepth, and at which byte.
func tooDeep(err error) (int64, bool) {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err != nil && strings.Contains(se.Err.Error(), "exceeded max depth") {
		return se.ByteOffset, true
	}
	return 0, false
}

// plainInteger reports whether s is written as the spec's integers are:
// digits without a sign or leading zeros ("0", "74"; not "+0" or "0074").
func plainInteger(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// jsonMediaType refuses (415) a compressed body and a Content-Type other
// than JSON. JSON is
// UTF-8 (RFC 8259), so a charset other than that is refused rather than
// ignored. No Content-Type at all is taken as JSON, as API Gateway does.
func jsonMediaType(req events.APIGatewayProxyRequest) error {
	if ce := header(req, "Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		// A compressed body would be read as malformed JSON (400).
		return errorf(runs.EUnsupportedMedia, "Content-Encoding %.40q is not supported: send the body uncompressed", ce)
	}
	ct := header(req, "Content-Type")
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || ok && !strings.EqualFold(cs, "utf-8") {
		return errorf(runs.EUnsupportedMedia, "Content-Type must be application/json (charset utf-8, if any)")
	}
	return nil
}

// jsonProblem describes a decoding error for the caller, naming the member
// by its JSON pointer, never quoting the decoder's own message; a syntax
// error (not I-JSON included) in the words strictjson.Problem gives it,
// which the loop's errors for a model's tool input use too.
func jsonProblem(err error) string {
	var te *shapeError
	if errors.Is(err, errTrailingData) {
		return "the body has data after the JSON object"
	}
	if problem, ok := strictjson.Problem(err); ok {
		return problem
	}
	if errors.As(err, &te) {
		switch {
		case te.Unknown:
			return fmt.Sprintf("unknown field %.80q", strictjson.Path(te.Pointer))
		case te.Pointer == "":
			return fmt.Sprintf("the body must be a JSON object, not %s", strictjson.KindName(te.Kind))
		case te.Kind == '0' && len(te.Value) <= 40:
			return fmt.Sprintf("field %.80q must be %s, not the number %s", strictjson.Path(te.Pointer), jsonTypeName(te.GoType), te.Value)
		}
		return fmt.Sprintf("field %.80q must be %s, not %s", strictjson.Path(te.Pointer), jsonTypeName(te.GoType), strictjson.KindName(te.Kind))
	}
	return "malformed JSON"
}

// jsonTypeName names the JSON a Go type decodes from, for an error message:
// "an array", never the Go type ([]loop.ClientResult), which is internal
// detail.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "a string (an RFC 3339 time)"
	case t == reflect.TypeFor[json.RawMessage]():
		return "a JSON value"
	case reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()):
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

func jsonResponse(status int, v any) events.APIGatewayProxyResponse {
	b, err := loop.MarshalJSON(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	return events.APIGatewayProxyResponse{
		StatusCode: status,
		Headers: map[string]string{
			"Content-Type":           "application/json",
			"Cache-Control":          "no-store",
			"X-Content-Type-Options": "nosniff",
		},
		Body: string(b),
	}
}

// repeatedQuery returns the first name, in sorted order, of a query
// parameter the request gives more than once, "" when there is none. Every
// parameter of the API takes one value, and API Gateway hands the function
// only the last of repeated values in QueryStringParameters: a request such
// as ?wait=1&wait=20 is refused rather than read as one of them.
func repeatedQuery(req events.APIGatewayProxyRequest) string {
	var names []string
	for k, vs := range req.MultiValueQueryStringParameters {
		if len(vs) > 1 {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return names[0]
}

func queryInt(req events.APIGatewayProxyRequest, name string, def, minV, maxV int64) (int64, error) {
	s, given := req.QueryStringParameters[name]
	if !given {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64) // "" (?wait=) too is no integer
	if err != nil || n < minV || n > maxV || !plainInteger(s) {
		return 0, errorf(runs.EBadRequest, "query parameter %s must be an integer from %d to %d", name, minV, maxV)
	}
	return n, nil
}
