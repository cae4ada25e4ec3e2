package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/routes"
)

// Body limits of the gateway. Bodies are read only after the caller is
// authenticated, and never beyond the limit.
const (
	// DefaultMaxBody is API Gateway's own payload limit.
	DefaultMaxBody = 10 << 20
	// MaxLinkBody caps what an unauthenticated approval-link request may
	// send: the decision form's own limit (routes.MaxFormBody).
	MaxLinkBody = routes.MaxFormBody
)

// Handler is an API Gateway proxy handler, the signature of the Lambdas' HTTP path.
type Handler func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// Gateway routes like the deployed REST API, by the route table
// (internal/routes): each route to its function's handler, bearer tokens
// required where the route is authenticated; it answers GET /healthz
// itself.
type Gateway struct {
	StartRun Handler
	Resume   Handler
	// Tokens maps bearer tokens to the principal they authenticate.
	Tokens map[string]string
	// MaxBody caps request bodies of authenticated routes (default
	// DefaultMaxBody); the unauthenticated approval-link routes take at
	// most MaxLinkBody.
	MaxBody int64
	Logger  *slog.Logger
}

// allRoutes is routes.All, built once: Lookup only reads it.
var allRoutes = routes.All()

// ServeHTTP adapts one request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	m, ok := allRoutes.LookupEscaped(r.Method, r.URL.EscapedPath())
	if !ok {
		if strings.HasPrefix(path, "/approvals/") {
			// A person's browser, on a link's address spelled otherwise
			// (a slash added): the problem page, as on every link route.
			refusePage(w, r, http.StatusNotFound, "This approval link's address is not valid")
			return
		}
		writeJSON(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+path)
		return
	}
	// A known path with another method goes to the path's function too:
	// the handler answers 405 with the path's methods.
	route := m.Route
	var h Handler
	switch route.Function {
	case routes.StartRun:
		h = g.StartRun
	case routes.Resume:
		h = g.Resume
	case routes.Local:
		if !m.Allowed {
			w.Header().Set("Allow", strings.Join(m.Allow, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, "method_not_allowed", "use "+strings.Join(m.Allow, ", "))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	resource, authenticated := route.Path, route.Authenticated
	// Authenticate before reading any of the body: an unauthenticated
	// caller never makes this process buffer its upload (API Gateway's
	// AWS_IAM check also refuses before the function sees the body).
	var principal string
	if authenticated {
		p, ok := g.authenticate(r)
		switch {
		case len(r.Header.Values("Authorization")) > 1:
			refuse(w, http.StatusUnauthorized, "unauthorized", "send one Authorization header, not several")
			return
		case !ok:
			refuse(w, http.StatusUnauthorized, "unauthorized", "the bearer token is not valid")
			return
		case p == "":
			refuse(w, http.StatusUnauthorized, "unauthorized", "authentication required: send a bearer token")
			return
		}
		principal = p
	}
	maxBody := g.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	if !authenticated && maxBody > MaxLinkBody {
		maxBody = MaxLinkBody // the approval form is small; its token is checked by the handler
	}
	// The approval-link routes answer a person's browser: their refusals
	// are the HTML problem page, as the handler's are.
	refuseHere := func(status int, code, msg string) {
		if authenticated {
			refuse(w, status, code, msg)
			return
		}
		refusePage(w, r, status, msg)
	}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		// Go's URL.Query drops a malformed pair silently (?limit=%zz), which
		// would read as a request without the parameter.
		refuseHere(http.StatusBadRequest, "bad_request", "the query string is malformed")
		return
	}
	if r.ContentLength > maxBody {
		refuseHere(http.StatusRequestEntityTooLarge, "too_large", "the body is over the gateway's limit")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			refuseHere(http.StatusRequestEntityTooLarge, "too_large", "the body is over the gateway's limit")
			return
		}
		refuseHere(http.StatusBadRequest, "bad_request", "the body could not be read")
		return
	}
	req := g.event(r, body, resource, m.Params)
	if principal != "" {
		req.RequestContext.Authorizer = map[string]any{"principalId": principal}
	}
	resp, err := h(r.Context(), req)
	if err != nil {
		g.log().ErrorContext(r.Context(), "handler failed", "resource", resource, "err", err)
		writeJSON(w, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	writeResponse(w, resp)
}

func (g *Gateway) log() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.Default()
}

// authenticate returns the principal of a valid bearer token, "" when none
// was sent, and ok=false for an unknown token or more than one
// Authorization header (ambiguous credentials are refused, not resolved by
// taking the first).
func (g *Gateway) authenticate(r *http.Request) (string, bool) {
	if len(r.Header.Values("Authorization")) > 1 {
		return "", false
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", true
	}
	scheme, token, found := strings.Cut(auth, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") { // schemes are case-insensitive (RFC 9110)
		return "", false
	}
	token = strings.TrimLeft(token, " ") // 1*SP after the scheme
	for t, p := range g.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			return p, true
		}
	}
	return "", false
}

func (g *Gateway) event(r *http.Request, body []byte, resource string, params map[string]string) events.APIGatewayProxyRequest {
	headers := map[string]string{}
	multi := map[string][]string{}
	for k, v := range r.Header {
		if strings.EqualFold(k, "Authorization") {
			continue // consumed by the gateway, like API Gateway's IAM auth
		}
		headers[k] = v[len(v)-1] // API Gateway keeps the last of repeated values here
		multi[k] = v
	}
	query := map[string]string{}
	multiQuery := map[string][]string{}
	for k, v := range r.URL.Query() {
		query[k] = v[len(v)-1]
		multiQuery[k] = v
	}
	req := events.APIGatewayProxyRequest{
		Resource:                        resource,
		Path:                            r.URL.Path,
		HTTPMethod:                      r.Method,
		Headers:                         headers,
		MultiValueHeaders:               multi,
		QueryStringParameters:           query,
		MultiValueQueryStringParameters: multiQuery,
		PathParameters:                  params,
		RequestContext: events.APIGatewayProxyRequestContext{
			RequestID:    requestID(),
			Stage:        "local",
			ResourcePath: resource,
			HTTPMethod:   r.Method,
			Path:         r.URL.Path,
			Identity:     events.APIGatewayRequestIdentity{SourceIP: strings.Split(r.RemoteAddr, ":")[0], UserAgent: r.UserAgent()},
		},
	}
	if utf8.Valid(body) {
		req.Body = string(body)
	} else {
		req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return req
}

func writeResponse(w http.ResponseWriter, resp events.APIGatewayProxyResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusBadGateway // API Gateway answers 502 for a malformed proxy response
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// refusePage answers like refuse with the approval pages' problem page.
func refusePage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Connection", "close")
	code, html := approvalpage.Problem(status, msg+".")
	for k, v := range approvalpage.Headers() {
		w.Header().Set(k, v)
	}
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, html)
	}
}

// refuse answers without reading the request body and closes the
// connection afterwards, so an unread upload is never drained.
func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Connection", "close")
	writeJSON(w, status, code, msg)
}

// writeJSON writes the API's error shape with the headers every API answer
// carries (httpapi's): no-store, so no cache keeps a refusal, and nosniff.
func writeJSON(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	_, _ = w.Write(b)
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewToken returns a random bearer token for local configs.
func NewToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("agt_%s", base64.RawURLEncoding.EncodeToString(b[:]))
}
