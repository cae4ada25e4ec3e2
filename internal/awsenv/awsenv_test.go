package awsenv_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/agentgate/agentgate/internal/awsenv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// recorder is an endpoint that remembers who called it and answers {}.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	auths []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auths = append(r.auths, req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.auths...)
}

// unsetenv removes the variables from the process environment for the
// test (restored after it).
func unsetenv(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		t.Setenv(k, "") // registers the restore
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadSignsWithTheEnvironmentCredentialsAtTheConfiguredEndpoints(t *testing.T) {
	// The service clients also look at the process environment: with
	// AWS_ENDPOINT_URL set there and no AWS_ENDPOINT_URL_DYNAMODB, they keep
	// the base endpoint (in a Lambda getenv is os.Getenv, so both agree).
	// `make test` exports AWS_ENDPOINT_URL for the whole run.
	unsetenv(t, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_LAMBDA", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
	all, ddb := newRecorder(t), newRecorder(t)
	cfg, err := awsenv.Load(env(map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_SESSION_TOKEN": "token", "AWS_ENDPOINT_URL": all.srv.URL, "AWS_ENDPOINT_URL_DYNAMODB": ddb.srv.URL,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" {
		t.Errorf("region %q, want eu-west-1", cfg.Region)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AKIDEXAMPLE" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" {
		t.Errorf("credentials %+v, %v", creds, err)
	}
	ctx := context.Background()
	_, _ = dynamodb.NewFromConfig(cfg).ListTables(ctx, &dynamodb.ListTablesInput{})
	_, _ = lambda.NewFromConfig(cfg).ListFunctions(ctx, &lambda.ListFunctionsInput{})
	if got := ddb.calls(); len(got) != 1 || !strings.Contains(got[0], "Credential=AKIDEXAMPLE/") || !strings.Contains(got[0], "/eu-west-1/dynamodb/") {
		t.Errorf("DynamoDB endpoint got %q, want one call signed by AKIDEXAMPLE for eu-west-1", got)
	}
	if got := all.calls(); len(got) != 1 || !strings.Contains(got[0], "/eu-west-1/lambda/") {
		t.Errorf("AWS_ENDPOINT_URL got %q, want the one Lambda call", got)
	}
}

func TestLoadIgnoresEndpointsWhenTold(t *testing.T) {
	cfg, err := awsenv.Load(env(map[string]string{
		"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "us-east-1" || cfg.BaseEndpoint != nil {
		t.Errorf("region %q endpoint %v, want us-east-1 and no endpoint", cfg.Region, aws.ToString(cfg.BaseEndpoint))
	}
}

func TestLoadNamesWhatIsMissing(t *testing.T) {
	_, err := awsenv.Load(env(map[string]string{"AWS_ACCESS_KEY_ID": "a"}))
	if err == nil || !strings.Contains(err.Error(), "AWS_REGION") || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") || strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("got %v, want an error naming AWS_REGION and AWS_SECRET_ACCESS_KEY only", err)
	}
}
