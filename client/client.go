package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Client calls one agentgate API. It is safe for concurrent use.
type Client struct {
	base *url.URL
	http *http.Client
	auth func(ctx context.Context, req *http.Request, body []byte) error
	// pollMin and pollMax bound Wait's backoff.
	pollMin, pollMax time.Duration
	// serverWait is how long Wait asks the server to wait for a change
	// (whole seconds; 0: Wait polls).
	serverWait time.Duration
	userAgent  string
	pageSize   int
	// waitNotify, when set, hears of each answer and retried error of Wait.
	waitNotify func(error)
	// pause waits d between two attempts of StartRun, or until ctx ends
	// (its error); nil: a timer (tests record the pauses instead).
	pause func(ctx context.Context, d time.Duration) error
}

// settings collect the options of New.
type settings struct {
	token      string
	aws        *aws.Config
	defaultAWS bool
	region     string
	httpClient *http.Client
	pollMin    time.Duration
	pollMax    time.Duration
	serverWait time.Duration
	userAgent  string
	pageSize   int
	waitNotify func(error)
}

// Option configures New.
type Option func(*settings)

// WithBearerToken authenticates with a bearer token: the local server's
// (agentgate serve --token principal=token).
func WithBearerToken(token string) Option { return func(s *settings) { s.token = token } }

// WithAWSConfig signs every request with SigV4 for service execute-api,
// with cfg's credentials (and region, unless the endpoint names one).
func WithAWSConfig(cfg aws.Config) Option { return func(s *settings) { s.aws = &cfg } }

// WithDefaultAWSCredentials signs every request with SigV4, with
// credentials from the AWS SDK's default chain (environment, shared
// config and credentials files, SSO, web identity, container and instance
// roles). This is what New does when given no credentials option.
func WithDefaultAWSCredentials() Option { return func(s *settings) { s.defaultAWS = true } }

// WithRegion sets the signing region; default: the region in the
// endpoint's host ({api}.execute-api.{region}.amazonaws.com), else the AWS
// configuration's.
func WithRegion(region string) Option { return func(s *settings) { s.region = region } }

// WithHTTPClient sends requests through c (default: a client with a 30 s
// timeout).
func WithHTTPClient(c *http.Client) Option { return func(s *settings) { s.httpClient = c } }

// WithPollInterval bounds Wait's polling: it starts at min and backs off
// to max (defaults 250 ms and 5 s).
func WithPollInterval(min, max time.Duration) Option {
	return func(s *settings) { s.pollMin, s.pollMax = min, max }
}

// WithPageSize sets the page size the iterators (Events,
// PendingApprovals) ask for, capped at what each route allows:
// MaxEventsPageSize (1000) for Events, MaxApprovalsPageSize (100) for
// PendingApprovals; default (n <= 0): those largest sizes.
func WithPageSize(n int) Option { return func(s *settings) { s.pageSize = n } }

// The largest pages the API serves: GET /runs/{id}/events and GET
// /approvals refuse a larger limit.
const (
	MaxEventsPageSize    = 1000
	MaxApprovalsPageSize = 100
)

// pageSizeUpTo is the page size an iterator asks for: the configured one,
// capped at max; max when none is configured.
func (c *Client) pageSizeUpTo(max int) int {
	if c.pageSize <= 0 {
		return max
	}
	return min(c.pageSize, max)
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(s *settings) { s.userAgent = ua } }

// WithServerWait makes Wait ask the server to hold each request until the
// run changes, for at most d (whole seconds, at most 20 s, and at most half
// the HTTP client's timeout), instead of polling: a change is then seen at
// once on the local server. The deployed API answers at once (it holds no
// Lambda), and Wait then backs off as when polling.
func WithServerWait(d time.Duration) Option { return func(s *settings) { s.serverWait = d } }

// WithWaitNotify has Wait call fn after each of its requests: with nil
// when the server answered, or with the error (throttling, a server
// error, an unreachable server) that Wait is about to retry after its
// back-off. Wait retries such errors silently until its context ends; fn
// lets a program say so while it happens, as the CLI does on stderr.
func WithWaitNotify(fn func(err error)) Option { return func(s *settings) { s.waitNotify = fn } }

// serverWait is how long Wait asks the server to wait for a change: the
// wanted time, at most 20 s and half the HTTP client's timeout (0: none),
// in whole seconds; 0 (Wait polls) when that is under a second.
func serverWait(want, timeout time.Duration) time.Duration {
	w := min(want, 20*time.Second)
	if timeout > 0 {
		w = min(w, timeout/2)
	}
	return max(w.Truncate(time.Second), 0)
}

// Errors of New for a client that signs with SigV4 (no WithBearerToken).
var (
	ErrNoRegion      = errors.New("client: no region for SigV4: set AWS_REGION or use WithRegion")
	ErrNoCredentials = errors.New("client: the AWS configuration has no credentials")
)

// DefaultUserAgent is sent unless WithUserAgent says otherwise.
const DefaultUserAgent = "agentgate-go-client/1"

// New returns a client for the API at endpoint: the deployed REST API's
// URL including the stage (the stack's ApiUrl output), or the local
// server's. Without WithBearerToken or WithAWSConfig, requests are signed
// with SigV4 from the default AWS credential chain.
func New(endpoint string, opts ...Option) (*Client, error) {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("client: endpoint %q is not an http(s) URL", endpoint)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: endpoint %q has a query or fragment", endpoint)
	}
	c := &Client{base: u, http: s.httpClient, pollMin: s.pollMin, pollMax: s.pollMax, userAgent: s.userAgent, pageSize: s.pageSize, waitNotify: s.waitNotify}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.pollMin <= 0 {
		c.pollMin = 250 * time.Millisecond
	}
	if c.pollMax < c.pollMin {
		c.pollMax = max(5*time.Second, c.pollMin)
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	c.serverWait = serverWait(s.serverWait, c.http.Timeout)
	switch {
	case s.token != "" && (s.aws != nil || s.defaultAWS):
		return nil, errors.New("client: give a bearer token or AWS credentials, not both")
	case s.token != "":
		tok := s.token
		c.auth = func(_ context.Context, req *http.Request, _ []byte) error {
			req.Header.Set("Authorization", "Bearer "+tok)
			return nil
		}
	default:
		cfg := s.aws
		if cfg == nil {
			loaded, err := config.LoadDefaultConfig(context.Background())
			if err != nil {
				return nil, fmt.Errorf("client: load AWS configuration: %w", err)
			}
			cfg = &loaded
		}
		region := s.region
		if region == "" {
			region = RegionOf(u.Host)
		}
		if region == "" {
			region = cfg.Region
		}
		if region == "" {
			return nil, ErrNoRegion
		}
		if cfg.Credentials == nil {
			return nil, ErrNoCredentials
		}
		c.auth = sigV4(aws.NewCredentialsCache(cfg.Credentials), region, v4.NewSigner())
	}
	return c, nil
}

// RegionOf returns the region of an API Gateway host
// ({api}.execute-api.{region}.amazonaws.com[.cn]), or "".
func RegionOf(host string) string {
	host, _, _ = strings.Cut(host, ":")
	parts := strings.Split(host, ".")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "execute-api" && strings.HasPrefix(parts[i+2], "amazonaws") {
			return parts[i+1]
		}
	}
	return ""
}

// SigningService is the SigV4 service name of API Gateway.
const SigningService = "execute-api"

// sigV4 signs a request for API Gateway with credentials from creds.
func sigV4(creds aws.CredentialsProvider, region string, signer *v4.Signer) func(context.Context, *http.Request, []byte) error {
	return func(ctx context.Context, req *http.Request, body []byte) error {
		cr, err := creds.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("retrieve AWS credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		return signer.SignHTTP(ctx, cr, req, hex.EncodeToString(sum[:]), SigningService, region, time.Now().UTC())
	}
}

// Error is an error answer of the API: its HTTP status, the API's code and
// message. Code is empty when the answer did not come from agentgate (API
// Gateway refusing a signature or throttling, a proxy).
type Error struct {
	StatusCode int
	Code       string
	Message    string
	// RequestID is API Gateway's request id, when the answer has one.
	RequestID string
	// RetryAfter is how long the server asked the caller to wait before
	// it sends the request again (the answer's Retry-After, in seconds or
	// as an HTTP date); 0 when it did not say.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(e.StatusCode), " ", "_"))
	}
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.StatusCode, code)
}

// The codes of Error.Code.
const (
	CodeBadRequest           = "bad_request"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodeGone                 = "gone"
	CodeTooLarge             = "too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeUnprocessable        = "unprocessable"
	CodeInternal             = "internal"
)

// ErrorCode returns the API code of err (an *Error in its chain), or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// resolve turns an API path whose segments are already escaped
// ("/runs/x/calls/sp%20ace") into a URL under the endpoint. The escaped
// form is the URL's RawPath, so a segment is escaped once on the wire
// (setting Path alone would escape its "%" again).
func (c *Client) resolve(path string) *url.URL {
	p, q, _ := strings.Cut(path, "?")
	u := *c.base
	raw := strings.TrimRight(c.base.EscapedPath(), "/") + p
	if unescaped, err := url.PathUnescape(raw); err == nil {
		u.Path, u.RawPath = unescaped, raw
	} else {
		u.Path, u.RawPath = strings.TrimRight(c.base.Path, "/")+p, ""
	}
	u.RawQuery = q
	return &u
}

// do sends one request and decodes a JSON answer into out; any status
// outside 2xx is an *Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doWith(ctx, method, path, nil, in, out)
}

// doWith is do with header's values sent besides the client's own.
func (c *Client) doWith(ctx context.Context, method, path string, header http.Header, in, out any) error {
	_, _, err := c.exchange(ctx, method, path, header, in, out)
	return err
}

// exchange is doWith returning the answer's status and header too. A 304
// Not Modified to a request that sent If-None-Match is no error: out is
// left as it is, for the caller to keep what it has.
func (c *Client) exchange(ctx context.Context, method, path string, header http.Header, in, out any) (int, http.Header, error) {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("encode request: %w", err)
		}
		body = b
	}
	req, err := http.NewRequestWithContext(ctx, method, c.resolve(path).String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if err := c.auth(ctx, req, body); err != nil {
		return 0, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusNotModified && req.Header.Get("If-None-Match") != "" {
		return resp.StatusCode, resp.Header, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, nil, errorOf(resp, b)
	}
	if out == nil {
		return resp.StatusCode, resp.Header, nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return 0, nil, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return resp.StatusCode, resp.Header, nil
}

// errorOf reads an error answer: agentgate's {"error":{code,message}},
// API Gateway's {"message"} or {"Message"}, or anything else.
func errorOf(resp *http.Response, b []byte) *Error {
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Amzn-Requestid"), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var ours struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	if json.Unmarshal(b, &ours) == nil {
		switch {
		case ours.Error != nil:
			e.Code, e.Message = ours.Error.Code, ours.Error.Message
		case ours.Message != "":
			e.Message = ours.Message
		case ours.MessageU != "":
			e.Message = ours.MessageU
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// retryAfter reads a Retry-After header at now: a number of seconds or an
// HTTP date; 0 for none, a time past or anything else.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(math.MaxInt64/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
