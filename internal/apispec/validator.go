package apispec

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-json-experiment/json/jsontext"
)

func init() {
	// The approval-link pages are HTML: validated as strings.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

// Validator checks API exchanges against a spec and remembers which
// declared responses it saw. It is safe for concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	bodies *bodySchemas
	// errorSchema validates the body of answers to requests no operation
	// matches (404, 405).
	errorSchema *openapi3.SchemaRef

	mu   sync.Mutex
	seen map[string]map[int]int // "METHOD /path" -> status -> count
}

// NewValidator returns a validator for the current spec (without planned
// parts): what servers implement today.
func NewValidator() (*Validator, error) {
	doc, err := Current()
	if err != nil {
		return nil, err
	}
	return NewValidatorFor(doc)
}

// MustValidator is NewValidator for tests: it fails t on error.
func MustValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := NewValidator()
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	return v
}

// NewValidatorFor returns a validator for doc. The document's servers are
// ignored: requests match by path alone, whatever the host or stage.
func NewValidatorFor(doc *openapi3.T) (*Validator, error) {
	c := *doc
	c.Servers = openapi3.Servers{{URL: "/"}}
	r, err := gorillamux.NewRouter(&c)
	if err != nil {
		return nil, fmt.Errorf("route the spec: %w", err)
	}
	es := doc.Components.Schemas["ErrorResponse"]
	if es == nil {
		return nil, errors.New("the spec has no ErrorResponse schema")
	}
	return &Validator{doc: &c, router: r, bodies: bodiesFor(doc), errorSchema: es, seen: map[string]map[int]int{}}, nil
}

// Exchange is one request and its response.
type Exchange struct {
	// Request is the request as sent (its Body is ignored; see RequestBody).
	Request     *http.Request
	RequestBody []byte
	// Authenticated says the caller was authenticated by the transport in
	// front of the API (a SigV4 identity or a bearer token); when false, the
	// request must carry an Authorization header to satisfy the spec's
	// security requirements.
	Authenticated bool
	Status        int
	Header        http.Header
	Body          []byte
}

type authKey struct{}

// Check validates one exchange and returns every mismatch, or nil.
func (v *Validator) Check(ctx context.Context, x Exchange) error {
	ctx = context.WithValue(ctx, authKey{}, x.Authenticated)
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	req.ContentLength = int64(len(x.RequestBody))
	route, params, err := v.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return v.checkUnrouted(x, http.StatusNotFound)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return v.checkUnrouted(x, http.StatusMethodNotAllowed)
	case err != nil:
		return fmt.Errorf("%s %s: route: %w", x.Request.Method, x.Request.URL.Path, err)
	}
	op := strings.ToUpper(route.Method) + " " + route.Path
	v.mu.Lock()
	if v.seen[op] == nil {
		v.seen[op] = map[int]int{}
	}
	v.seen[op][x.Status]++
	v.mu.Unlock()

	// The bodies are checked by v.bodies (see bodySchemas), the rest by
	// openapi3filter.
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    authenticate,
		ExcludeRequestBody:    true,
		ExcludeResponseBody:   true,
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if rb := route.Operation.RequestBody; rb != nil && rb.Value != nil {
		var bodyErr error
		switch {
		case len(x.RequestBody) == 0 && rb.Value.Required:
			bodyErr = errors.New("request body has an error: value is required but missing")
		case len(x.RequestBody) > 0:
			if err := v.bodies.check(rb.Value.Content, req.Header, x.RequestBody); err != nil {
				bodyErr = fmt.Errorf("request body has an error: %w", err)
			}
		}
		if bodyErr != nil {
			reqErr = errors.Join(reqErr, bodyErr)
		}
	}
	if reqErr == nil && !strictJSON(req.Header.Get("Content-Type"), x.RequestBody) {
		// kin-openapi reads bodies with encoding/json, which takes the last
		// of two equal member names and replaces invalid UTF-8; the API's
		// bodies are I-JSON (README), so such a body is malformed; so is a
		// top-level integer written with a fraction or an exponent.
		reqErr = errors.New("the JSON body is not I-JSON (RFC 7493): a member name twice in one object, invalid UTF-8 or a lone surrogate escape; or a top-level integer is written with a fraction or an exponent")
	}

	var problems []string
	class := x.Status / 100
	switch {
	case reqErr != nil && class == 2:
		problems = append(problems, fmt.Sprintf("the spec refuses this request but the server accepted it (%d): %v", x.Status, oneLine(reqErr)))
	case reqErr != nil && class != 4 && x.Status != http.StatusInternalServerError:
		problems = append(problems, fmt.Sprintf("the spec refuses this request; the server must answer 4xx, not %d: %v", x.Status, oneLine(reqErr)))
	case reqErr == nil && x.Status == http.StatusBadRequest && errorCode(x.Body) == "bad_request":
		problems = append(problems, fmt.Sprintf("the spec accepts this request but the server refused it as malformed: %s", oneLine(errors.New(string(x.Body)))))
	}

	resIn := in
	if req.Method == http.MethodHead {
		// openapi3filter skips HEAD responses; check the headers and status
		// as a GET of the same (HEAD) operation, then the empty body.
		get := *in
		get.Request = req.Clone(req.Context())
		get.Request.Method = http.MethodGet
		resIn = &get
		if len(x.Body) > 0 {
			problems = append(problems, "a HEAD response has a body")
		}
	}
	if x.Status == http.StatusNotModified {
		// openapi3filter never validates a 304: checked here.
		problems = append(problems, notModifiedProblems(route, x)...)
	} else {
		res := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: resIn, Status: x.Status, Header: x.Header, Options: opts,
		}
		res.SetBodyBytes(x.Body)
		err := openapi3filter.ValidateResponse(ctx, res)
		if err == nil {
			err = v.checkResponseBody(resIn.Request.Method, route, x)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("the spec does not describe this response (%d %s): %v", x.Status, x.Header.Get("Content-Type"), oneLine(err)))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s (operation %s) answered %d:\n  - %s\n  response: %s", x.Request.Method, x.Request.URL.RequestURI(), op, x.Status,
		strings.Join(problems, "\n  - "), clip(x.Body))
}

// checkResponseBody checks the body of x's response to method (a HEAD's
// as a GET's, see Check) against the media types of the response the spec
// gives the operation for x's status, the statuses and methods
// ValidateResponse checks (ExcludeResponseBody leaves it the rest).
func (v *Validator) checkResponseBody(method string, route *routers.Route, x Exchange) error {
	switch x.Status {
	case http.StatusNotModified, http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusMovedPermanently:
		return nil
	}
	if method == http.MethodHead {
		return nil
	}
	ref := route.Operation.Responses.Status(x.Status)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return nil
	}
	if err := v.bodies.check(ref.Value.Content, x.Header, x.Body); err != nil {
		return fmt.Errorf("response %w", err)
	}
	return nil
}

// notModifiedProblems checks a 304 answer, which openapi3filter skips:
// the operation declares it, it carries every header the spec requires of
// it, each as its schema says, and it has no body (RFC 9110, section
// 15.4.5).
func notModifiedProblems(route *routers.Route, x Exchange) []string {
	ref := route.Operation.Responses.Status(http.StatusNotModified)
	if ref == nil || ref.Value == nil {
		return []string{"the spec does not describe this response (304): status is not supported"}
	}
	var problems []string
	names := make([]string, 0, len(ref.Value.Headers))
	for name := range ref.Value.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h := ref.Value.Headers[name].Value
		values := x.Header.Values(name)
		switch {
		case len(values) == 0 && h.Required:
			problems = append(problems, fmt.Sprintf("the spec does not describe this response (304): response header %q missing", name))
		case len(values) > 1:
			problems = append(problems, fmt.Sprintf("the spec does not describe this response (304): response header %q given %d times", name, len(values)))
		case len(values) == 1 && h.Schema != nil && h.Schema.Value != nil:
			if err := h.Schema.Value.VisitJSON(values[0], openapi3.EnableJSONSchema2020()); err != nil {
				problems = append(problems, fmt.Sprintf("the spec does not describe this response (304): response header %q doesn't match schema: %v", name, oneLine(err)))
			}
		}
	}
	if len(x.Body) > 0 {
		problems = append(problems, "a 304 response has a body")
	}
	return problems
}

// strictJSON reports whether a request body of the given content type is
// acceptable JSON: I-JSON (RFC 7493) when the type is JSON, anything
// otherwise.
func strictJSON(contentType string, body []byte) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" || len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	return jsontext.Value(body).IsValid() && integralTopLevel(body)
}

// integralTopLevel reports whether every number member at the top level of
// a JSON object body is written as an integer (no fraction, no exponent).
// The request bodies' top-level numbers are all integers (max_tokens,
// approval_ttl_seconds, ...), which the API decodes strictly: 2.0 or 2e0
// is malformed there (README), though JSON Schema counts it an integer.
// Numbers deeper in (tool inputs, input schemas) are not held to this.
func integralTopLevel(body []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return true
	}
	for dec.PeekKind() != '}' {
		if _, err := dec.ReadToken(); err != nil { // the member name
			return true
		}
		v, err := dec.ReadValue()
		if err != nil {
			return true
		}
		if v.Kind() == '0' && bytes.ContainsAny(v, ".eE") {
			return false
		}
	}
	return true
}

// checkUnrouted validates the answer to a request no operation matches: a
// JSON error with the given status.
func (v *Validator) checkUnrouted(x Exchange, want int) error {
	var problems []string
	if x.Status != want {
		problems = append(problems, fmt.Sprintf("no operation matches it: want %s, got %d", statusText(want), x.Status))
	}
	if ct := x.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		problems = append(problems, fmt.Sprintf("want a JSON error, got Content-Type %q", ct))
	} else {
		var body any
		if err := json.Unmarshal(x.Body, &body); err != nil {
			problems = append(problems, "the body is not JSON")
		} else if err := v.errorSchema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
			problems = append(problems, "the body is not an ErrorResponse: "+oneLine(err))
		}
	}
	if want == http.StatusMethodNotAllowed && x.Status == want && x.Header.Get("Allow") == "" {
		problems = append(problems, "a 405 must carry an Allow header")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s (no operation in the spec) answered %d:\n  - %s\n  response: %s", x.Request.Method, x.Request.URL.RequestURI(), x.Status,
		strings.Join(problems, "\n  - "), clip(x.Body))
}

// authenticate satisfies a security requirement when the transport
// authenticated the caller, or when the request carries credentials of the
// scheme's kind.
func authenticate(ctx context.Context, in *openapi3filter.AuthenticationInput) error {
	if ok, _ := ctx.Value(authKey{}).(bool); ok {
		return nil
	}
	auth := in.RequestValidationInput.Request.Header.Get("Authorization")
	switch in.SecurityScheme.Type {
	case "http":
		if strings.HasPrefix(auth, "Bearer ") {
			return nil
		}
	case "apiKey":
		if strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
			return nil
		}
	}
	return fmt.Errorf("no %s credentials", in.SecuritySchemeName)
}

func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.Index(s, "\nSchema:"); i >= 0 {
		s = s[:i]
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

// Seen returns, per operation ("METHOD /path"), how often each status was
// answered.
func (v *Validator) Seen() map[string]map[int]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]map[int]int, len(v.seen))
	for op, m := range v.seen {
		out[op] = map[int]int{}
		for s, n := range m {
			out[op][s] = n
		}
	}
	return out
}

// Unseen lists the declared responses ("METHOD /path status") the
// validator never saw, sorted; operations in skip are left out, and so is
// every status in skipStatus.
func (v *Validator) Unseen(skipOps []string, skipStatus ...int) []string {
	seen := v.Seen()
	var out []string
	for _, op := range Operations(v.doc) {
		if slices.Contains(skipOps, op.String()) {
			continue
		}
		for _, s := range op.Statuses {
			if !slices.Contains(skipStatus, s) && seen[op.String()][s] == 0 {
				out = append(out, fmt.Sprintf("%s %d", op, s))
			}
		}
	}
	return out
}

// Handler wraps an API Gateway proxy handler: every request and response
// is checked, and a mismatch fails t (without stopping the test).
func (v *Validator) Handler(t testing.TB, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		resp, err := h(ctx, ev)
		if err != nil {
			return resp, err
		}
		x, cerr := exchangeOfEvent(ev, resp)
		if cerr == nil {
			cerr = v.Check(ctx, x)
		}
		if cerr != nil {
			t.Errorf("openapi.yaml: %v", cerr)
		}
		return resp, err
	}
}

// exchangeOfEvent turns a proxy request and response into HTTP terms.
func exchangeOfEvent(ev events.APIGatewayProxyRequest, resp events.APIGatewayProxyResponse) (Exchange, error) {
	q := url.Values{}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = append([]string(nil), vs...)
	}
	for k, val := range ev.QueryStringParameters {
		if _, ok := q[k]; !ok {
			q.Set(k, val)
		}
	}
	u := &url.URL{Scheme: "https", Host: "api.invalid", Path: ev.Path, RawQuery: q.Encode()}
	req, err := http.NewRequest(ev.HTTPMethod, u.String(), nil)
	if err != nil {
		return Exchange{}, fmt.Errorf("request of event: %w", err)
	}
	for k, vs := range ev.MultiValueHeaders {
		for _, val := range vs {
			req.Header.Add(k, val)
		}
	}
	for k, val := range ev.Headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, val)
		}
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			body = []byte(ev.Body)
		}
	}
	authenticated := ev.RequestContext.Identity.UserArn != ""
	if p, ok := ev.RequestContext.Authorizer["principalId"].(string); ok && p != "" {
		authenticated = true
	}
	h := http.Header{}
	for k, val := range resp.Headers {
		h.Set(k, val)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, val := range vs {
			h.Add(k, val)
		}
	}
	rb := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			rb = b
		}
	}
	return Exchange{Request: req, RequestBody: body, Authenticated: authenticated, Status: resp.StatusCode, Header: h, Body: rb}, nil
}

// Transport wraps an HTTP transport (nil: http.DefaultTransport): every
// request and response through it is checked, and a mismatch fails t
// (without stopping the test). The response body is read whole and handed
// on unchanged.
func (v *Validator) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{v: v, t: t, base: base}
}

type transport struct {
	v    *Validator
	t    testing.TB
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	x := Exchange{Request: req, RequestBody: body, Status: resp.StatusCode, Header: resp.Header, Body: rb}
	if cerr := tr.v.Check(req.Context(), x); cerr != nil {
		tr.t.Errorf("openapi.yaml: %v", cerr)
	}
	return resp, nil
}
