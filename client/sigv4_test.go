package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
)

// The deployed API's host and stage in these tests; connections to it go
// to a local stand-in for API Gateway.
const (
	apiHost  = "abc123.execute-api.eu-west-1.amazonaws.com"
	apiStage = "/prod"
	region   = "eu-west-1"
)

// iamKey is one IAM caller the stand-in knows.
type iamKey struct {
	secret, principal string
}

var authHeader = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$`)

// iamGateway stands in for API Gateway with AWS_IAM authorization: it
// verifies each request's SigV4 signature by signing the received request
// again with the SDK's own signer (over exactly the headers the caller
// signed), refuses a bad one with 403 like API Gateway, and forwards a good
// one, stage prefix removed, to the API as the key's principal.
type iamGateway struct {
	keys     map[string]iamKey // access key id -> key
	next     http.Handler
	tokenOf  func(principal string) string
	verified atomic.Int32
	lastErr  atomic.Value
}

func (g *iamGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	principal, err := g.verify(r)
	if err != nil {
		g.lastErr.Store(err.Error())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"message":%q}`, "The request signature we calculated does not match the signature you provided.")
		return
	}
	g.verified.Add(1)
	r.Header.Set("Authorization", "Bearer "+g.tokenOf(principal))
	for _, h := range []string{"X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
		r.Header.Del(h)
	}
	r.URL.Path = strings.TrimPrefix(r.URL.Path, apiStage)
	r.URL.RawPath = ""
	g.next.ServeHTTP(w, r)
}

func (g *iamGateway) verify(r *http.Request) (string, error) {
	m := authHeader.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return "", fmt.Errorf("no SigV4 Authorization header: %q", r.Header.Get("Authorization"))
	}
	akid, day, reg, service, signed, sig := m[1], m[2], m[3], m[4], strings.Split(m[5], ";"), m[6]
	key, ok := g.keys[akid]
	switch {
	case !ok:
		return "", fmt.Errorf("unknown access key %s", akid)
	case service != client.SigningService || reg != region:
		return "", fmt.Errorf("signed for %s in %s, want %s in %s", service, reg, client.SigningService, region)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != day {
		return "", fmt.Errorf("bad X-Amz-Date %q", r.Header.Get("X-Amz-Date"))
	}
	if d := time.Since(at); d > 5*time.Minute || d < -5*time.Minute {
		return "", fmt.Errorf("signature time %s is too far from now", at)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "", err
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	again, err := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	for _, h := range signed {
		if h == "host" {
			continue
		}
		for _, v := range r.Header.Values(h) {
			again.Header.Add(h, v)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: akid, SecretAccessKey: key.secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), service, reg, at); err != nil {
		return "", err
	}
	want := authHeader.FindStringSubmatch(again.Header.Get("Authorization"))
	if want == nil || want[6] != sig {
		return "", fmt.Errorf("signature mismatch")
	}
	if want[5] != m[5] {
		return "", fmt.Errorf("signed headers %s, the signer signs %s", m[5], want[5])
	}
	return key.principal, nil
}

// deployed starts the API behind the IAM stand-in and returns an HTTP
// client whose connections to apiHost reach it (its traffic validated).
func deployed(t *testing.T) (*apitest.Server, *iamGateway, *http.Client) {
	t.Helper()
	alice, bob := "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:role/approver"
	s := apitest.Start(t, apitest.Options{Principals: []string{alice, bob}})
	target, _ := url.Parse(s.URL)
	g := &iamGateway{
		keys: map[string]iamKey{
			"AKIDALICE": {secret: "alice-secret", principal: alice},
			"ASIABOB":   {secret: "bob-secret", principal: bob},
		},
		next:    httputil.NewSingleHostReverseProxy(target),
		tokenOf: s.Token,
	}
	front := httptest.NewServer(g)
	t.Cleanup(front.Close)
	addr := strings.TrimPrefix(front.URL, "http://")
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return s, g, &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestSigV4AgainstDeployedAPI runs the whole story through SigV4: signed
// requests with static and session credentials, a stage prefix, queries
// and bodies; every signature is verified by the SDK's own signer.
func TestSigV4AgainstDeployedAPI(t *testing.T) {
	_, g, hc := deployed(t)
	ctx := ctx(t)
	endpoint := "http://" + apiHost + apiStage
	alice, err := client.New(endpoint, client.WithHTTPClient(hc), client.WithPollInterval(5*time.Millisecond, 50*time.Millisecond),
		client.WithAWSConfig(aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIDALICE", "alice-secret", "")}))
	if err != nil {
		t.Fatal(err)
	}
	// The approver has temporary credentials (an assumed role): the session
	// token is signed too.
	bob, err := client.New(endpoint, client.WithHTTPClient(hc), client.WithPollInterval(5*time.Millisecond, 50*time.Millisecond),
		client.WithAWSConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("ASIABOB", "bob-secret", "session-token")}))
	if err != nil {
		t.Fatal(err)
	}
	run, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "update pricing", Approvers: []string{"arn:aws:iam::123456789012:role/approver"}})
	if err != nil {
		t.Fatalf("start: %v (gateway: %v)", err, g.lastErr.Load())
	}
	if run.Initiator != "arn:aws:iam::123456789012:user/alice" {
		t.Errorf("initiator %q, want alice's ARN", run.Initiator)
	}
	run, err = bob.Wait(ctx, run.ID, client.StatusWaiting)
	if err != nil {
		t.Fatalf("wait: %v (gateway: %v)", err, g.lastErr.Load())
	}
	// The inbox through signed GETs with a query string (limit, and the
	// cursor of the page before): two runs wait for the approver's role.
	second, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "second", Approvers: []string{"arn:aws:iam::123456789012:role/approver"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Wait(ctx, second.ID, client.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	inboxPaged, _ := client.New(endpoint, client.WithHTTPClient(hc), client.WithPageSize(1),
		client.WithAWSConfig(aws.Config{Credentials: credentials.NewStaticCredentialsProvider("ASIABOB", "bob-secret", "session-token")}))
	before := g.verified.Load()
	var listed []string
	for a, err := range inboxPaged.PendingApprovals(ctx) {
		if err != nil {
			t.Fatalf("inbox: %v (gateway: %v)", err, g.lastErr.Load())
		}
		listed = append(listed, a.RunID)
	}
	if want := []string{second.ID, run.ID}; !slices.Equal(listed, want) {
		t.Errorf("the role's inbox %v, want %v", listed, want)
	}
	if got := g.verified.Load() - before; got < 2 {
		t.Errorf("%d signed inbox pages verified, want one per page", got)
	}
	if _, err := alice.Cancel(ctx, second.ID); err != nil {
		t.Fatal(err)
	}

	if _, err := bob.Decide(ctx, run.ID, client.ApproveTurn(run.Pending.TurnDigest)); err != nil {
		t.Fatal(err)
	}
	done, err := alice.Wait(ctx, run.ID)
	if err != nil || done.Status != client.StatusCompleted {
		t.Fatalf("done: %+v %v", done, err)
	}
	// The pages' next links are relative to the API root: the client puts
	// them under the stage.
	paged, _ := client.New(endpoint, client.WithHTTPClient(hc), client.WithPageSize(2),
		client.WithAWSConfig(aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIDALICE", "alice-secret", "")}))
	n := 0
	for _, err := range paged.Events(ctx, run.ID, 0) {
		if err != nil {
			t.Fatalf("events: %v (gateway: %v)", err, g.lastErr.Load())
		}
		n++
	}
	if n < 6 {
		t.Errorf("%d events, want the whole trail", n)
	}
	if g.verified.Load() < 5+int32(n/2) {
		t.Errorf("%d requests verified, want every one", g.verified.Load())
	}

	// Wrong secret: API Gateway's 403, surfaced as *client.Error without an
	// agentgate code.
	mallory, _ := client.New(endpoint, client.WithHTTPClient(hc),
		client.WithAWSConfig(aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIDALICE", "guessed", "")}))
	_, err = mallory.Run(ctx, run.ID)
	var e *client.Error
	if !asError(err, &e) || e.StatusCode != 403 || e.Code != "" || !strings.Contains(e.Message, "signature") {
		t.Fatalf("a wrong secret: got %v", err)
	}
	if !strings.Contains(fmt.Sprint(g.lastErr.Load()), "signature mismatch") {
		t.Errorf("the stand-in refused for %v, want a signature mismatch", g.lastErr.Load())
	}
}

// TestSigV4TamperedRequestRefused: a signed request changed on the way
// (body, path or query) fails verification.
func TestSigV4TamperedRequestRefused(t *testing.T) {
	_, g, hc := deployed(t)
	tamper := func(name string, change func(*http.Request)) {
		t.Run(name, func(t *testing.T) {
			c, err := client.New("http://"+apiHost+apiStage, client.WithHTTPClient(&http.Client{Transport: tamperer{hc.Transport, change}}),
				client.WithAWSConfig(aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIDALICE", "alice-secret", "")}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.StartRun(ctx(t), client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}})
			var e *client.Error
			if !asError(err, &e) || e.StatusCode != 403 {
				t.Fatalf("got %v, want API Gateway's 403", err)
			}
			if !strings.Contains(fmt.Sprint(g.lastErr.Load()), "signature mismatch") {
				t.Errorf("refused for %v", g.lastErr.Load())
			}
		})
	}
	tamper("body", func(r *http.Request) {
		b := `{"prompt":"y","approvers":["bob"]}`
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
	})
	tamper("path", func(r *http.Request) { r.URL.Path = "/prod/runs/other" })
	tamper("query", func(r *http.Request) { r.URL.RawQuery = "limit=1" })
}

type tamperer struct {
	base   http.RoundTripper
	change func(*http.Request)
}

func (t tamperer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	t.change(r)
	return t.base.RoundTrip(r)
}

func asError(err error, e **client.Error) bool {
	var ce *client.Error
	ok := errors.As(err, &ce)
	*e = ce
	return ok
}
