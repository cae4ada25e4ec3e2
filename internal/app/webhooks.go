package app

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/webhook"
)

// Webhooks configure webhook delivery; nil in Deps (and in the options of
// OpenLocal and NewAWS) means this deployment delivers none and refuses a
// run's webhook_url.
type Webhooks struct {
	// Signer signs deliveries: a *webhook.Signer (local secret file or
	// flag) or a webhook.SecretsManagerSource (the Lambdas).
	Signer webhook.SignerSource
	// Policy says which targets are accepted, at submit and at every
	// attempt.
	Policy webhook.Policy
	// Resolver resolves target hosts (nil: the system resolver).
	Resolver webhook.Resolver
	// RootCAs verifies receivers' certificates (nil: the system pool).
	RootCAs *x509.CertPool
	// Schedule is the retry schedule (zero: webhook.DefaultSchedule).
	Schedule webhook.Schedule
	// DeliveryConcurrency bounds the runs whose deliveries a sweep makes
	// at the same time, and serve's delivery goroutines (0:
	// service.DefaultDeliveryConcurrency).
	DeliveryConcurrency int
	// Now is the clock of webhook-timestamp (nil: time.Now).
	Now func() time.Time
}

// wireWebhooks gives the API the submit-time check and the sweeper a
// sender.
func (a *App) wireWebhooks(w *Webhooks) error {
	if w == nil {
		return nil
	}
	sender, err := webhook.NewSender(webhook.SenderConfig{Signer: w.Signer, Policy: w.Policy, Resolver: w.Resolver, RootCAs: w.RootCAs, Now: w.Now})
	if err != nil {
		return fmt.Errorf("app: webhooks: %w", err)
	}
	a.API.Webhooks = &httpapi.WebhookTargets{Policy: w.Policy, Resolver: w.Resolver}
	a.Sweeper.Webhooks = sender
	a.Sweeper.Schedule = w.Schedule
	a.Sweeper.DeliveryConcurrency = w.DeliveryConcurrency
	return nil
}
