package awscall

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/agentgate/agentgate/internal/awsenv"
)

// fakeService answers with the statuses, headers and bodies of answers, in
// order (the last one again when they run out), and keeps each request.
type fakeService struct {
	mu       sync.Mutex
	answers  []answer
	requests []*http.Request
	bodies   []string
}

type answer struct {
	status int
	header map[string]string
	body   string
}

func (f *fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.answers[min(len(f.requests), len(f.answers)-1)]
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, string(body))
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// newClient returns a client of svc calling f, whose sleeps are recorded
// instead of slept.
func newClient(t *testing.T, f *fakeService, svc Service, session string) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", session)}, svc)
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	return c, &slept
}

func TestDoSignsTheRequestAsTheSDKSignerDoes(t *testing.T) {
	f := &fakeService{answers: []answer{{status: 202}}}
	c, _ := newClient(t, f, Lambda, "TOKEN")
	body := []byte(`{"a":1}`)
	res, err := c.Do(t.Context(), Request{Method: "POST", Path: "/2015-03-31/functions/fn:alias/invocations",
		Header: http.Header{"X-Amz-Invocation-Type": {"Event"}}, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 202 {
		t.Errorf("status %d, want 202", res.Status)
	}
	got := f.requests[0]
	if got.Method != "POST" || got.URL.Path != "/2015-03-31/functions/fn:alias/invocations" || f.bodies[0] != string(body) {
		t.Fatalf("got %s %s %s, want the request sent", got.Method, got.URL.Path, f.bodies[0])
	}
	if got.Header.Get("X-Amz-Security-Token") != "TOKEN" {
		t.Errorf("X-Amz-Security-Token %q, want the session token", got.Header.Get("X-Amz-Security-Token"))
	}
	// Sign what the server received again, at the same time: the
	// Authorization header must be the same.
	at, err := time.Parse("20060102T150405Z", got.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatalf("X-Amz-Date: %v", err)
	}
	again, _ := http.NewRequest(got.Method, "http://"+got.Host+got.URL.RequestURI(), strings.NewReader(string(body)))
	for _, h := range []string{"X-Amz-Invocation-Type", "Content-Length"} {
		again.Header.Set(h, got.Header.Get(h))
	}
	again.ContentLength = int64(len(body))
	creds := aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "TOKEN"}
	const bodyHash = "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862" // sha256 of {"a":1}
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, again, bodyHash, "lambda", "eu-west-1", at); err != nil {
		t.Fatal(err)
	}
	if g, w := got.Header.Get("Authorization"), again.Header.Get("Authorization"); g != w || !strings.Contains(g, "/eu-west-1/lambda/aws4_request") {
		t.Errorf("Authorization\n%s\nwant\n%s", g, w)
	}
}

func TestDoTriesThrottlesAndServerErrorsAgain(t *testing.T) {
	f := &fakeService{answers: []answer{
		{status: 429, header: map[string]string{"X-Amzn-ErrorType": "TooManyRequestsException"}, body: `{"message":"Rate exceeded"}`},
		{status: 500, body: `{"__type":"ServiceException"}`},
		{status: 202},
	}}
	c, slept := newClient(t, f, Lambda, "")
	if _, err := c.Do(t.Context(), Request{Method: "POST", Path: "/x"}); err != nil {
		t.Fatalf("after a throttle and a server error: %v, want the third attempt's success", err)
	}
	if len(f.requests) != 3 || len(*slept) != 2 {
		t.Errorf("%d attempts and %d back-offs, want 3 and 2", len(f.requests), len(*slept))
	}
	for i, d := range *slept {
		if limit := time.Duration(1<<(i+1)) * time.Second; d < 0 || d > limit {
			t.Errorf("back-off %d: %v, want the SDK's jittered delay (at most %v)", i+1, d, limit)
		}
	}

	f = &fakeService{answers: []answer{{status: 503, header: map[string]string{"X-Amzn-ErrorType": "ServiceUnavailableException:http://internal.amazon.com/"}, body: `{"Message":"try later"}`}}}
	c, _ = newClient(t, f, Lambda, "")
	_, err := c.Do(t.Context(), Request{Method: "POST", Path: "/x"})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailableException" || ae.ErrorMessage() != "try later" || ae.ErrorFault() != smithy.FaultServer {
		t.Fatalf("error %v, want the service's code, message and a server fault", err)
	}
	if len(f.requests) != MaxAttempts {
		t.Errorf("%d attempts, want %d", len(f.requests), MaxAttempts)
	}
}

func TestDoReturnsClientErrorsAtOnce(t *testing.T) {
	f := &fakeService{answers: []answer{{status: 404,
		header: map[string]string{"X-Amzn-ErrorType": "ResourceNotFoundException", "X-Amzn-RequestId": "req-1"},
		body:   `{"Type":"User","Message":"Function not found: arn:aws:lambda:eu-west-1:1:function:x"}`}}}
	c, _ := newClient(t, f, Lambda, "")
	_, err := c.Do(t.Context(), Request{Method: "POST", Path: "/x"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "ResourceNotFoundException" || ae.RequestID != "req-1" ||
		!strings.HasPrefix(ae.Message, "Function not found") || ae.ErrorFault() != smithy.FaultClient {
		t.Fatalf("error %#v, want a 404 ResourceNotFoundException with the message and request id", err)
	}
	if len(f.requests) != 1 {
		t.Errorf("%d attempts, want 1 (a client error is not tried again)", len(f.requests))
	}

	f = &fakeService{answers: []answer{{status: 400, body: `{"__type":"com.amazonaws.secretsmanager#ResourceNotFoundException","message":"no secret"}`}}}
	c, _ = newClient(t, f, SESv2, "")
	if _, err := c.Do(t.Context(), Request{Method: "POST", Path: "/x"}); !errors.As(err, &ae) || ae.Code != "ResourceNotFoundException" || ae.Message != "no secret" {
		t.Errorf("error %v, want the __type's code without its namespace", err)
	}
}

// TestDoReadsXMLErrors: the Query protocol (SES's first API) and REST-XML
// answer errors as XML, which gave the HTTP status text alone as the code
// and no message.
func TestDoReadsXMLErrors(t *testing.T) {
	tests := []struct {
		name              string
		header            map[string]string
		body              string
		code, message, id string
	}{
		{"query", map[string]string{"X-Amzn-RequestId": "req-h"},
			`<ErrorResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><Error><Type>Sender</Type><Code>MessageRejected</Code>` +
				`<Message>Email address is not verified. The following identities failed the check in region EU-WEST-1: a@b.test</Message></Error>` +
				`<RequestId>req-b</RequestId></ErrorResponse>`,
			"MessageRejected", "Email address is not verified. The following identities failed the check in region EU-WEST-1: a@b.test", "req-h"},
		{"query, request id in the body only", nil,
			"<?xml version=\"1.0\"?>\n<ErrorResponse><Error><Code>InvalidParameterValue</Code><Message>Missing final '@domain'</Message></Error><RequestId>req-b</RequestId></ErrorResponse>",
			"InvalidParameterValue", "Missing final '@domain'", "req-b"},
		{"rest-xml", nil,
			`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><RequestId>req-s</RequestId></Error>`,
			"NoSuchBucket", "The specified bucket does not exist", "req-s"},
		{"not an error document", nil, `<html><body>Bad Request</body></html>`, "Bad Request", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeService{answers: []answer{{status: 400, header: tt.header, body: tt.body}}}
			c, _ := newClient(t, f, SES, "")
			_, err := c.Do(t.Context(), Request{Method: "POST", Path: "/"})
			var ae *APIError
			if !errors.As(err, &ae) || ae.Code != tt.code || ae.Message != tt.message || ae.RequestID != tt.id || ae.Status != 400 {
				t.Fatalf("error %#v, want code %q, message %q, request id %q", ae, tt.code, tt.message, tt.id)
			}
		})
	}
}

func TestDoStopsWithItsContext(t *testing.T) {
	f := &fakeService{answers: []answer{{status: 500}}}
	c, _ := newClient(t, f, Lambda, "")
	ctx, cancel := context.WithCancel(t.Context())
	c.sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	if _, err := c.Do(ctx, Request{Method: "POST", Path: "/x"}); err == nil {
		t.Fatal("a failing call succeeded")
	}
	if len(f.requests) != 1 {
		t.Errorf("%d attempts, want 1 (the context ended during the back-off)", len(f.requests))
	}
}

func TestEndpointIsTheSDKClientsEndpoint(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		svc  Service
		want string
	}{
		{"regional", nil, Lambda, "https://lambda.eu-west-1.amazonaws.com"},
		{"regional SES v2", nil, SESv2, "https://email.eu-west-1.amazonaws.com"},
		{"all services", map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566"}, Lambda, "http://localhost:4566"},
		{"this service first", map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566", "AWS_ENDPOINT_URL_LAMBDA": "http://localhost:9000"}, Lambda, "http://localhost:9000"},
		{"another service's", map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566", "AWS_ENDPOINT_URL_LAMBDA": "http://localhost:9000"}, SESv2, "http://localhost:4566"},
		{"SES v2's", map[string]string{"AWS_ENDPOINT_URL_SESV2": "http://localhost:9001"}, SESv2, "http://localhost:9001"},
		{"regional SES", nil, SES, "https://email.eu-west-1.amazonaws.com"},
		{"SES's", map[string]string{"AWS_ENDPOINT_URL_SES": "http://localhost:9002", "AWS_ENDPOINT_URL_SESV2": "http://localhost:9001"}, SES, "http://localhost:9002"},
		{"SES v2's is not SES's", map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566", "AWS_ENDPOINT_URL_SESV2": "http://localhost:9001"}, SES, "http://localhost:4566"},
		{"ignored", map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566", "AWS_ENDPOINT_URL_LAMBDA": "http://localhost:9000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, Lambda, "https://lambda.eu-west-1.amazonaws.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := awsenv.Load(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			got, err := Endpoint(cfg, tt.svc)
			if err != nil || got != tt.want {
				t.Errorf("Endpoint = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestDNSSuffixIsThePartitions compares dnsSuffix with the endpoint rules
// of a generated SDK client (DynamoDB's: dynamodb.<region>.<suffix>).
func TestDNSSuffixIsThePartitions(t *testing.T) {
	resolver := dynamodb.NewDefaultEndpointResolverV2()
	for _, region := range []string{"us-east-1", "eu-west-1", "ap-southeast-7", "mx-central-1", "il-central-1", "ca-west-1",
		"cn-north-1", "cn-northwest-1", "us-gov-west-1", "us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1", "us-isof-south-1", "eusc-de-east-1"} {
		ep, err := resolver.ResolveEndpoint(t.Context(), dynamodb.EndpointParameters{Region: aws.String(region)})
		if err != nil {
			t.Fatalf("%s: %v", region, err)
		}
		if want := "dynamodb." + region + "." + dnsSuffix(region); ep.URI.Host != want {
			t.Errorf("%s: the SDK's DynamoDB host is %s, dnsSuffix gives %s", region, ep.URI.Host, want)
		}
	}
}

func TestNewRefusesAnIncompleteConfiguration(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("a", "s", "")
	for name, cfg := range map[string]aws.Config{
		"no region":      {Credentials: creds},
		"no credentials": {Region: "eu-west-1"},
		"relative URL":   {Region: "eu-west-1", Credentials: creds, BaseEndpoint: aws.String("localhost:4566")},
	} {
		if _, err := New(cfg, Lambda); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestSecretStringCallsAsTheSDKClientDoes compares the GetSecretValue call
// with the one the SDK's Secrets Manager client makes, and reads both kinds
// of answer.
func TestSecretStringCallsAsTheSDKClientDoes(t *testing.T) {
	f := &fakeService{answers: []answer{
		{status: 200, body: `{"ARN":"arn:aws:secretsmanager:eu-west-1:1:secret:s-AbCdEf","Name":"s","SecretString":"v4lue","VersionId":"1"}`},
		{status: 200, body: `{"ARN":"arn:aws:secretsmanager:eu-west-1:1:secret:b-AbCdEf","Name":"b","SecretBinary":"AAE="}`},
		{status: 400, body: `{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`},
	}}
	c, _ := newClient(t, f, SecretsManager, "")
	s := &Secrets{client: c}
	if v, err := s.SecretString(t.Context(), "s"); err != nil || v != "v4lue" {
		t.Errorf("SecretString = %q, %v; want v4lue", v, err)
	}
	if _, err := s.SecretString(t.Context(), "b"); !errors.Is(err, ErrNoSecretString) {
		t.Errorf("binary secret: %v, want ErrNoSecretString", err)
	}
	_, err := s.SecretString(t.Context(), "missing")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ResourceNotFoundException" {
		t.Errorf("missing secret: %v, want ResourceNotFoundException", err)
	}

	sdk := &fakeService{answers: []answer{{status: 200, body: `{"SecretString":"v4lue"}`}}}
	srv := httptest.NewServer(sdk)
	defer srv.Close()
	client := secretsmanager.New(secretsmanager.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	if _, err := client.GetSecretValue(t.Context(), &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	got, want := f.requests[0], sdk.requests[0]
	for _, h := range []string{"X-Amz-Target", "Content-Type"} {
		if got.Header.Get(h) != want.Header.Get(h) {
			t.Errorf("%s: %q, the SDK sends %q", h, got.Header.Get(h), want.Header.Get(h))
		}
	}
	if got.Method != want.Method || got.URL.Path != want.URL.Path || f.bodies[0] != sdk.bodies[0] {
		t.Errorf("%s %s %s, the SDK sends %s %s %s", got.Method, got.URL.Path, f.bodies[0], want.Method, want.URL.Path, sdk.bodies[0])
	}
	if !strings.Contains(got.Header.Get("Authorization"), "/eu-west-1/secretsmanager/aws4_request") {
		t.Errorf("Authorization %q is not signed for secretsmanager", got.Header.Get("Authorization"))
	}
}
