package awscall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// SecretsManager is AWS Secrets Manager (its JSON 1.1 protocol: POST / with
// the operation in X-Amz-Target).
var SecretsManager = Service{SDKID: "Secrets Manager", EndpointPrefix: "secretsmanager", SigningName: "secretsmanager"}

// ErrNoSecretString says that a secret holds a binary value only.
var ErrNoSecretString = errors.New("the secret has no string value")

// Secrets reads secrets with Secrets Manager's GetSecretValue call, as the
// SDK's client sends it (a test compares them), without linking that
// client (0.28 MB of every function that reads a secret).
type Secrets struct {
	client *Client
}

// NewSecrets returns a reader of Secrets Manager with cfg (New).
func NewSecrets(cfg aws.Config) (*Secrets, error) {
	c, err := New(cfg, SecretsManager)
	if err != nil {
		return nil, err
	}
	return &Secrets{client: c}, nil
}

// SecretString returns the current SecretString of the secret id (a name
// or an ARN); ErrNoSecretString when the secret holds a binary value only.
// Errors never contain the value.
func (s *Secrets) SecretString(ctx context.Context, id string) (string, error) {
	body, err := json.Marshal(struct {
		SecretID string `json:"SecretId"`
	}{id})
	if err != nil {
		return "", err
	}
	res, err := s.client.Do(ctx, Request{Method: http.MethodPost, Path: "/",
		Header: http.Header{"X-Amz-Target": {"secretsmanager.GetSecretValue"}, "Content-Type": {"application/x-amz-json-1.1"}},
		Body:   body})
	if err != nil {
		return "", err
	}
	var out struct {
		SecretString *string `json:"SecretString"`
	}
	if err := json.Unmarshal(res.Body, &out); err != nil {
		return "", fmt.Errorf("GetSecretValue answer is not JSON")
	}
	if out.SecretString == nil {
		return "", ErrNoSecretString
	}
	return *out.SecretString, nil
}
