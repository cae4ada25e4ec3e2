package webhook

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment variables read by LoadConfig (the deployed functions).
const (
	// EnvSecret names the Secrets Manager secret (id or ARN) holding the
	// signing secrets; webhooks are off without it.
	EnvSecret = "AGENTGATE_WEBHOOK_SECRET"
	// EnvAllow is the deployment allow-list of internal address prefixes
	// webhooks may go to (comma-separated; see Policy.Allow).
	EnvAllow = "AGENTGATE_WEBHOOK_ALLOW"
	// EnvConcurrency is how many runs' deliveries a sweep makes at the
	// same time (ParseConcurrency; default
	// service.DefaultDeliveryConcurrency).
	EnvConcurrency = "AGENTGATE_WEBHOOK_CONCURRENCY"
)

// MaxConcurrency is the most runs whose deliveries a sweep may make at the
// same time (AGENTGATE_WEBHOOK_CONCURRENCY, serve --webhook-concurrency,
// the stack's webhookConcurrency).
const MaxConcurrency = 64

// ParseConcurrency reads a delivery concurrency: an integer from 1 to
// MaxConcurrency. The error says what is wanted; callers name the
// variable, flag or setting it came from.
func ParseConcurrency(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > MaxConcurrency {
		return 0, fmt.Errorf("%q: want an integer from 1 to %d", s, MaxConcurrency)
	}
	return n, nil
}

// Config is the webhook configuration of a deployment.
type Config struct {
	// SecretID is the Secrets Manager secret of the signing secrets
	// (AGENTGATE_WEBHOOK_SECRET); empty means webhooks are off.
	SecretID string
	// Policy is https only, with the allow-list of AGENTGATE_WEBHOOK_ALLOW.
	Policy Policy
}

// Enabled reports whether the deployment delivers webhooks.
func (c Config) Enabled() bool { return c.SecretID != "" }

// LoadConfig reads the configuration with getenv (os.Getenv in a main);
// errors name the variable at fault.
func LoadConfig(getenv func(string) string) (Config, error) {
	c := Config{SecretID: strings.TrimSpace(getenv(EnvSecret))}
	allow, err := ParseAllowList(getenv(EnvAllow))
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvAllow, err)
	}
	if len(allow) > 0 && !c.Enabled() {
		return Config{}, fmt.Errorf("%s is set but %s is not: set both or neither", EnvAllow, EnvSecret)
	}
	c.Policy.Allow = allow
	return c, nil
}
