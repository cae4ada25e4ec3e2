package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The Standard Webhooks headers every delivery carries.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// SecretPrefix starts every signing secret; the rest is the base64 of the
// key.
const SecretPrefix = "whsec_"

// Key sizes the specification allows (24 to 64 bytes); GenerateSecret uses
// 32.
const (
	minKeyBytes      = 24
	maxKeyBytes      = 64
	generatedKeySize = 32
)

// GenerateSecret returns a new signing secret: "whsec_" and the base64 of
// 32 bytes from crypto/rand.
func GenerateSecret() (string, error) {
	key := make([]byte, generatedKeySize)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// Signer signs deliveries with one or more secrets. With several (during a
// rotation), every delivery carries one v1 signature per secret, and a
// receiver that knows any of them verifies it.
type Signer struct {
	hooks []*standardwebhooks.Webhook
}

// NewSigner parses secrets: one or more "whsec_<base64 key>" separated by
// white space (the form of the Secrets Manager value and of the local
// secret file). Keys must be 24 to 64 bytes. Errors never quote a secret.
func NewSigner(secrets string) (*Signer, error) {
	fields := strings.Fields(secrets)
	if len(fields) == 0 {
		return nil, errors.New("webhook secret: empty")
	}
	s := &Signer{}
	for i, f := range fields {
		enc, ok := strings.CutPrefix(f, SecretPrefix)
		if !ok {
			return nil, fmt.Errorf("webhook secret %d: does not start with %q", i+1, SecretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("webhook secret %d: not base64 after %q", i+1, SecretPrefix)
		}
		if len(key) < minKeyBytes || len(key) > maxKeyBytes {
			return nil, fmt.Errorf("webhook secret %d: key of %d bytes, want %d to %d", i+1, len(key), minKeyBytes, maxKeyBytes)
		}
		h, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			return nil, fmt.Errorf("webhook secret %d: %w", i+1, err)
		}
		s.hooks = append(s.hooks, h)
	}
	return s, nil
}

// Sign returns the webhook-signature header value for one attempt: the
// space-separated "v1,<base64 HMAC-SHA256>" of "id.timestamp.body" under
// every secret.
func (s *Signer) Sign(id string, at time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(s.hooks))
	for _, h := range s.hooks {
		sig, err := h.Sign(id, at, body)
		if err != nil {
			return "", fmt.Errorf("sign webhook %s: %w", id, err)
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// String describes s without its keys, so a Signer printed by accident
// leaks nothing.
func (s *Signer) String() string { return fmt.Sprintf("webhook.Signer(%d secrets)", len(s.hooks)) }

// GoString is String, for %#v.
func (s *Signer) GoString() string { return s.String() }
