package webhook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// SignerSource hands out the Signer to use now. A *Signer is one (it never
// changes); SecretsManagerSource re-reads its secret so a rotation reaches
// running functions. An error means no signer can be had now (a
// *SecretUnavailableError from SecretsManagerSource): no attempt can be
// made until it can.
type SignerSource interface {
	CurrentSigner(ctx context.Context) (*Signer, error)
}

// SecretUnavailableError says that the signing secrets cannot be had now:
// the Secrets Manager secret could not be read (an error of the service,
// throttling, a deleted secret, access denied, no answer) or its value is
// not one NewSigner takes. Its message names the secret and a short
// reason (the service's error code, or what is wrong with the value),
// never the value, nor the service's message (which names the caller's
// role and account). Unwrap gives the error it stands for.
type SecretUnavailableError struct {
	// SecretID is the secret's name or ARN (empty for a source without
	// one).
	SecretID string
	// Reason is short and holds no secret: a service's error code
	// (AccessDeniedException, ResourceNotFoundException,
	// ThrottlingException...), "timeout", "connection", "cancelled",
	// "invalid value: ..." (what NewSigner refused, never the value) or
	// "read failed".
	Reason string
	err    error
}

func (e *SecretUnavailableError) Error() string {
	if e.SecretID == "" {
		return "webhook secret unavailable: " + e.Reason
	}
	return fmt.Sprintf("%s=%q: webhook secret unavailable: %s", EnvSecret, e.SecretID, e.Reason)
}

// Unwrap returns the error the secret could not be read with.
func (e *SecretUnavailableError) Unwrap() error { return e.err }

// secretUnavailable is err, from reading the secret id, as a
// *SecretUnavailableError (itself when it is one).
func secretUnavailable(id string, err error) *SecretUnavailableError {
	var su *SecretUnavailableError
	if errors.As(err, &su) {
		return su
	}
	return &SecretUnavailableError{SecretID: id, Reason: readFailure(err), err: err}
}

// readFailure classifies an error of a secret read without its text: an
// API error's message can name the caller's role, account and key.
func readFailure(err error) string {
	var coded interface{ ErrorCode() string } // smithy.APIError; *awscall.APIError is one
	var netErr net.Error
	switch {
	case errors.As(err, &coded) && coded.ErrorCode() != "":
		return coded.ErrorCode()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &netErr):
		return "connection"
	}
	return "read failed"
}

// CurrentSigner returns s itself.
func (s *Signer) CurrentSigner(context.Context) (*Signer, error) { return s, nil }

var _ SignerSource = (*Signer)(nil)

// LoadSecretFile reads the signing secrets (see NewSigner) from a file.
func LoadSecretFile(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook secret file: %w", err)
	}
	s, err := NewSigner(string(b))
	if err != nil {
		return nil, fmt.Errorf("webhook secret file %s: %w", path, err)
	}
	return s, nil
}

// EnsureSecretFile loads the secret file at path or, when it does not
// exist, writes a new secret there (mode 0600) first; created says which.
func EnsureSecretFile(path string) (s *Signer, created bool, err error) {
	s, err = LoadSecretFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return s, false, err
	}
	secret, err := GenerateSecret()
	if err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("webhook secret file: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("webhook secret file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("webhook secret file: %w", err)
	}
	s, err = NewSigner(secret)
	return s, true, err
}

// SecretsGetter reads a secret's string value; *awscall.Secrets is one
// (awscall.ErrNoSecretString for a binary secret).
type SecretsGetter interface {
	SecretString(ctx context.Context, id string) (string, error)
}

// Secret refresh timing of SecretsManagerSource.
const (
	// SecretRefresh is how long a secret read from Secrets Manager is used
	// before it is read again.
	SecretRefresh = 5 * time.Minute
	// secretStaleGrace is how long the last good secret keeps signing when
	// re-reading fails.
	secretStaleGrace = time.Hour
)

// SecretsManagerSource reads the signing secrets from one Secrets Manager
// secret (its SecretString, in the form NewSigner takes) and re-reads it
// after SecretRefresh. When a re-read fails, the last good secret keeps
// signing for up to an hour; after that, or when no read has succeeded
// yet, CurrentSigner returns a *SecretUnavailableError. It is safe for
// concurrent use.
type SecretsManagerSource struct {
	client SecretsGetter
	id     string
	now    func() time.Time

	mu      sync.Mutex
	signer  *Signer
	fetched time.Time
}

// NewSecretsManagerSource returns a source for the secret id (a name or
// ARN); now is its clock (nil: time.Now).
func NewSecretsManagerSource(client SecretsGetter, id string, now func() time.Time) *SecretsManagerSource {
	if now == nil {
		now = time.Now
	}
	return &SecretsManagerSource{client: client, id: id, now: now}
}

// CurrentSigner returns the signer of the secret's current value.
func (s *SecretsManagerSource) CurrentSigner(ctx context.Context) (*Signer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.signer != nil && now.Sub(s.fetched) < SecretRefresh {
		return s.signer, nil
	}
	signer, err := s.read(ctx)
	if err != nil {
		if s.signer != nil && now.Sub(s.fetched) < SecretRefresh+secretStaleGrace {
			return s.signer, nil
		}
		return nil, err
	}
	s.signer, s.fetched = signer, now
	return signer, nil
}

func (s *SecretsManagerSource) read(ctx context.Context) (*Signer, error) {
	value, err := s.client.SecretString(ctx, s.id)
	if err != nil {
		return nil, secretUnavailable(s.id, err)
	}
	signer, err := NewSigner(strings.TrimSpace(value))
	if err != nil {
		// NewSigner's errors say which secret of the value is wrong and
		// how, never its characters.
		return nil, &SecretUnavailableError{SecretID: s.id, Reason: "invalid value: " + err.Error(), err: err}
	}
	return signer, nil
}
