package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/agentgate/agentgate/internal/awscall"
)

// SecretsClient reads a secret's string value for the header values;
// *awscall.Secrets is one (awscall.ErrNoSecretString for a binary secret).
type SecretsClient interface {
	SecretString(ctx context.Context, id string) (string, error)
}

// resolveHeaders reads each header's value from its secret or environment
// variable. Errors name the server and the header, never a value.
func resolveHeaders(ctx context.Context, s Server, secrets SecretsClient, getenv func(string) string) (http.Header, error) {
	h, name, err := resolveHeaderValues(ctx, s, secrets, getenv)
	if err != nil {
		return nil, &headerError{name: name, err: err}
	}
	return h, nil
}

// headerError is a header value that could not be resolved.
type headerError struct {
	name string // the header's
	err  error
}

func (e *headerError) Error() string { return e.err.Error() }
func (e *headerError) Unwrap() error { return e.err }

// resolveHeaderValues returns the headers, or the name of the one that
// could not be resolved and why.
func resolveHeaderValues(ctx context.Context, s Server, secrets SecretsClient, getenv func(string) string) (http.Header, string, error) {
	h := http.Header{}
	for _, name := range sortedKeys(s.Headers) {
		hv := s.Headers[name]
		var value string
		switch {
		case hv.SecretARN != "":
			if secrets == nil {
				return nil, name, fmt.Errorf("header %s: no Secrets Manager client to read %s", name, hv.SecretARN)
			}
			v, err := secrets.SecretString(ctx, hv.SecretARN)
			if errors.Is(err, awscall.ErrNoSecretString) {
				return nil, name, fmt.Errorf("header %s: secret %s has no string value", name, hv.SecretARN)
			}
			if err != nil {
				return nil, name, fmt.Errorf("header %s: read secret %s: %w", name, hv.SecretARN, err)
			}
			value = v
			if hv.JSONKey != "" {
				var obj map[string]any
				if err := json.Unmarshal([]byte(value), &obj); err != nil {
					return nil, name, fmt.Errorf("header %s: secret %s is not a JSON object, so json_key %q cannot be read", name, hv.SecretARN, hv.JSONKey)
				}
				v, ok := obj[hv.JSONKey].(string)
				if !ok {
					return nil, name, fmt.Errorf("header %s: secret %s has no string field %q", name, hv.SecretARN, hv.JSONKey)
				}
				value = v
			}
		default:
			value = getenv(hv.Env)
			if value == "" {
				return nil, name, fmt.Errorf("header %s: environment variable %s is not set", name, hv.Env)
			}
		}
		value = strings.TrimSpace(value)
		if value == "" || strings.ContainsAny(value, "\r\n") {
			return nil, name, fmt.Errorf("header %s: the value is empty or holds line breaks", name)
		}
		h.Set(name, hv.Prefix+value)
	}
	return h, "", nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
