package awscall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Service is an AWS service as its API is reached and signed.
type Service struct {
	// SDKID is the service's SDK id, as AWS_ENDPOINT_URL_<SDKID> spells it
	// (upper case, spaces as underscores).
	SDKID string
	// EndpointPrefix is the first label of the service's regional host.
	EndpointPrefix string
	// SigningName is the service name SigV4 signs with.
	SigningName string
}

// The services called through this package (their SDK clients' ids,
// endpoint prefixes and signing names).
var (
	Lambda = Service{SDKID: "Lambda", EndpointPrefix: "lambda", SigningName: "lambda"}
	SESv2  = Service{SDKID: "SESv2", EndpointPrefix: "email", SigningName: "ses"}
	// SES is SES's first API (2010-12-01, the Query protocol: a form
	// posted to /), on the same host as SES v2 but configured apart
	// (AWS_ENDPOINT_URL_SES).
	SES = Service{SDKID: "SES", EndpointPrefix: "email", SigningName: "ses"}
)

// MaxAttempts is how many times a call is sent when its answer is a
// throttle, a server error or no answer at all (the SDK's default, 3).
const MaxAttempts = retry.DefaultMaxAttempts

// maxResponse caps the body of an answer read into memory.
const maxResponse = 1 << 20

// Client calls one service in one region. It is safe for concurrent use.
type Client struct {
	svc      Service
	region   string
	endpoint *url.URL
	creds    aws.CredentialsProvider
	http     aws.HTTPClient
	signer   *v4.Signer
	backoff  *retry.ExponentialJitterBackoff
	// sleep waits between attempts (tests replace it).
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a client of svc with cfg's region, credentials, endpoints and
// HTTP client (nil: the SDK's default). It makes no call.
func New(cfg aws.Config, svc Service) (*Client, error) {
	if cfg.Region == "" {
		return nil, fmt.Errorf("awscall: %s: no region", svc.SDKID)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("awscall: %s: no credentials", svc.SDKID)
	}
	ep, err := Endpoint(cfg, svc)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(ep)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("awscall: %s endpoint %q is not an absolute URL", svc.SDKID, ep)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = awshttp.NewBuildableClient()
	}
	return &Client{svc: svc, region: cfg.Region, endpoint: u, creds: cfg.Credentials, http: hc,
		signer: v4.NewSigner(), backoff: retry.NewExponentialJitterBackoff(retry.DefaultMaxBackoff), sleep: sleep}, nil
}

// serviceEndpoints is the SDK's interface for AWS_ENDPOINT_URL_<SERVICE>
// (internal/configsources); awsenv's config source implements it.
type serviceEndpoints interface {
	GetServiceBaseEndpoint(ctx context.Context, sdkID string) (string, bool, error)
}

// ignoreEndpoints is the SDK's interface for
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
type ignoreEndpoints interface {
	GetIgnoreConfiguredEndpoints(ctx context.Context) (bool, bool, error)
}

// Endpoint returns the base URL the SDK's client of svc would call with
// cfg: the service's own configured endpoint, else cfg.BaseEndpoint (both
// unless endpoints are ignored), else https://<prefix>.<region>.<the
// partition's DNS suffix>.
func Endpoint(cfg aws.Config, svc Service) (string, error) {
	ctx := context.Background()
	ignore := false
	for _, src := range cfg.ConfigSources {
		if p, ok := src.(ignoreEndpoints); ok {
			if v, found, _ := p.GetIgnoreConfiguredEndpoints(ctx); found {
				ignore = v
				break
			}
		}
	}
	if !ignore {
		for _, src := range cfg.ConfigSources {
			if p, ok := src.(serviceEndpoints); ok {
				v, found, err := p.GetServiceBaseEndpoint(ctx, svc.SDKID)
				if err != nil {
					return "", fmt.Errorf("awscall: %s endpoint: %w", svc.SDKID, err)
				}
				if found {
					return v, nil
				}
			}
		}
	}
	if cfg.BaseEndpoint != nil {
		return *cfg.BaseEndpoint, nil
	}
	return "https://" + svc.EndpointPrefix + "." + cfg.Region + "." + dnsSuffix(cfg.Region), nil
}

// dnsSuffix is the DNS suffix of region's partition (the SDK's
// partitions.json, matched by region prefix; a test compares it with the
// DynamoDB client's endpoint rules).
func dnsSuffix(region string) string {
	for _, p := range []struct{ prefix, suffix string }{
		{"cn-", "amazonaws.com.cn"},
		{"eusc-", "amazonaws.eu"},
		{"us-iso-", "c2s.ic.gov"},
		{"us-isob-", "sc2s.sgov.gov"},
		{"eu-isoe-", "cloud.adc-e.uk"},
		{"us-isof-", "csp.hci.ic.gov"},
	} {
		if strings.HasPrefix(region, p.prefix) {
			return p.suffix
		}
	}
	return "amazonaws.com"
}

// Request is one call: a method, a path below the endpoint (escaped as it
// goes on the wire), headers and a body.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Response is a 2xx answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// APIError is a non-2xx answer of the service. It satisfies
// smithy.APIError, as the SDK clients' errors do.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Code is the service's error code (ThrottlingException,
	// ResourceNotFoundException...), or the HTTP status text when the
	// answer names none.
	Code string
	// Message is the service's message.
	Message string
	// RequestID is the request's id (x-amzn-RequestId), for AWS support.
	RequestID string
}

var _ smithy.APIError = (*APIError)(nil)

func (e *APIError) Error() string {
	msg := fmt.Sprintf("api error %s (HTTP %d)", e.Code, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request id " + e.RequestID + ")"
	}
	return msg
}

// ErrorCode is the service's error code.
func (e *APIError) ErrorCode() string { return e.Code }

// ErrorMessage is the service's message.
func (e *APIError) ErrorMessage() string { return e.Message }

// ErrorFault says whose fault the error is: the server's for 5xx.
func (e *APIError) ErrorFault() smithy.ErrorFault {
	switch {
	case e.Status >= 500:
		return smithy.FaultServer
	case e.Status >= 400:
		return smithy.FaultClient
	}
	return smithy.FaultUnknown
}

// retryable says whether another attempt may succeed: throttles, server
// errors and requests that got no answer (a cancelled or expired context
// never is).
func (e *APIError) retryable() bool {
	if e.Status == http.StatusTooManyRequests || e.Status >= 500 {
		return true
	}
	switch e.Code {
	case "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded", "RequestThrottled", "RequestThrottledException", "SlowDown", "TooManyRequests":
		return true
	}
	return false
}

// Do sends r, signed, and returns the 2xx answer. A throttle, a server
// error or a transport failure is tried again, up to MaxAttempts in all,
// after the SDK's jittered exponential back-off. A non-2xx answer is an
// *APIError.
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	var err error
	for attempt := 1; ; attempt++ {
		var resp *Response
		resp, err = c.send(ctx, r)
		if err == nil {
			return resp, nil
		}
		if attempt >= MaxAttempts || ctx.Err() != nil {
			break
		}
		var ae *APIError
		if errors.As(err, &ae) && !ae.retryable() {
			break
		}
		delay, berr := c.backoff.BackoffDelay(attempt, err)
		if berr != nil {
			break
		}
		if serr := c.sleep(ctx, delay); serr != nil {
			break
		}
	}
	return nil, fmt.Errorf("%s %s: %w", c.svc.SDKID, r.Path, err)
}

// send makes one attempt.
func (c *Client) send(ctx context.Context, r Request) (*Response, error) {
	u := *c.endpoint
	u.Path = strings.TrimSuffix(u.Path, "/") + r.Path
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	req.ContentLength = int64(len(r.Body))
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	sum := sha256.Sum256(r.Body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), c.svc.SigningName, c.region, time.Now().UTC()); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if res.StatusCode/100 == 2 {
		return &Response{Status: res.StatusCode, Header: res.Header, Body: body}, nil
	}
	return nil, apiError(res, body)
}

// apiError reads an error answer: an XML body (the Query and REST-XML
// protocols: <ErrorResponse><Error><Code>, or <Error><Code> at the root) by
// its Code and Message; otherwise the code from the X-Amzn-ErrorType header
// or the JSON body's __type or code (REST-JSON and JSON 1.1 protocols), the
// message from message or Message. A namespace or ":url" suffix is cut from
// the code.
func apiError(res *http.Response, body []byte) *APIError {
	code, msg, id := xmlError(body)
	if code == "" && msg == "" {
		var doc struct {
			Type     string `json:"__type"`
			Code     string `json:"code"`
			Message  string `json:"message"`
			Message2 string `json:"Message"`
		}
		_ = json.Unmarshal(body, &doc)
		code = res.Header.Get("X-Amzn-ErrorType")
		for _, c := range []string{doc.Type, doc.Code} {
			if code == "" {
				code = c
			}
		}
		msg = doc.Message
		if msg == "" {
			msg = doc.Message2
		}
	}
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code = code[:i]
	}
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	if code == "" {
		code = http.StatusText(res.StatusCode)
	}
	if h := res.Header.Get("X-Amzn-Requestid"); h != "" {
		id = h
	} else if h := res.Header.Get("X-Amz-Request-Id"); h != "" {
		id = h
	}
	return &APIError{Status: res.StatusCode, Code: code, Message: msg, RequestID: id}
}

// xmlError reads the code, message and request id of an XML error body; all
// empty when body is no XML error.
func xmlError(body []byte) (code, msg, id string) {
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("<")) {
		return "", "", ""
	}
	type fields struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	var doc struct {
		fields
		Error     fields `xml:"Error"`
		RequestID string `xml:"RequestId"`
	}
	if xml.Unmarshal(body, &doc) != nil {
		return "", "", ""
	}
	if doc.Error.Code != "" || doc.Error.Message != "" {
		return doc.Error.Code, doc.Error.Message, doc.RequestID
	}
	return doc.Code, doc.Message, doc.RequestID
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
