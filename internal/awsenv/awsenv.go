package awsenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// The variables Load reads (the AWS SDKs' names; Lambda sets the region and
// credential ones for every function).
const (
	EnvRegion        = "AWS_REGION"
	EnvDefaultRegion = "AWS_DEFAULT_REGION"
	EnvAccessKeyID   = "AWS_ACCESS_KEY_ID"
	EnvSecretKey     = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken  = "AWS_SESSION_TOKEN"
	// EnvEndpointURL sends every client to one endpoint (an emulator);
	// EnvEndpointURL + "_" + a service's SDK id in upper case with spaces
	// as underscores (AWS_ENDPOINT_URL_LAMBDA, AWS_ENDPOINT_URL_DYNAMODB)
	// sends one service's client there instead.
	EnvEndpointURL = "AWS_ENDPOINT_URL"
	// EnvIgnoreEndpoints set to true ignores the endpoint variables.
	EnvIgnoreEndpoints = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
)

// Load returns the SDK configuration from getenv (os.Getenv in main): the
// region (AWS_REGION, else AWS_DEFAULT_REGION), static credentials
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN),
// and the endpoint variables. A missing region or credential is an error
// naming the variable. Everything else (HTTP client, retries) is the service
// clients' default.
func Load(getenv func(string) string) (aws.Config, error) {
	region := getenv(EnvRegion)
	if region == "" {
		region = getenv(EnvDefaultRegion)
	}
	var missing []string
	if region == "" {
		missing = append(missing, EnvRegion)
	}
	id, secret := getenv(EnvAccessKeyID), getenv(EnvSecretKey)
	if id == "" {
		missing = append(missing, EnvAccessKeyID)
	}
	if secret == "" {
		missing = append(missing, EnvSecretKey)
	}
	if len(missing) > 0 {
		return aws.Config{}, fmt.Errorf("AWS configuration: missing environment variable(s): %s", strings.Join(missing, ", "))
	}
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv(EnvSessionToken), Source: "awsenv"}
	cfg := aws.Config{
		Region:        region,
		Credentials:   staticCredentials{creds},
		ConfigSources: []any{endpoints{getenv}},
	}
	if e := getenv(EnvEndpointURL); e != "" && !ignoreEndpoints(getenv) {
		cfg.BaseEndpoint = aws.String(e)
	}
	return cfg, nil
}

// staticCredentials hands out the same credentials until the process ends:
// Lambda's environment credentials last as long as the execution
// environment.
type staticCredentials struct{ creds aws.Credentials }

func (s staticCredentials) Retrieve(context.Context) (aws.Credentials, error) { return s.creds, nil }

// endpoints answers the service clients' questions about configured
// endpoints (the SDK's configsources interfaces, matched by method).
type endpoints struct{ getenv func(string) string }

// GetServiceBaseEndpoint returns AWS_ENDPOINT_URL_<SERVICE> for the SDK id
// of a service ("DynamoDB", "Lambda", "SESv2", "Secrets Manager").
func (e endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	name := EnvEndpointURL + "_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_")
	if v := e.getenv(name); v != "" {
		return v, true, nil
	}
	return "", false, nil
}

// GetIgnoreConfiguredEndpoints reports AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (e endpoints) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	return ignoreEndpoints(e.getenv), true, nil
}

func ignoreEndpoints(getenv func(string) string) bool {
	return strings.EqualFold(getenv(EnvIgnoreEndpoints), "true")
}
