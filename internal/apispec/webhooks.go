package apispec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Webhooks returns the names of doc's webhooks (one per event type the
// server sends), sorted.
func Webhooks(doc *openapi3.T) []string {
	names := make([]string, 0, len(doc.Webhooks))
	for name := range doc.Webhooks {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// WebhookOperation returns the POST operation of doc's webhook name.
func WebhookOperation(doc *openapi3.T, name string) (*openapi3.Operation, error) {
	item := doc.Webhooks[name]
	if item == nil {
		return nil, fmt.Errorf("openapi.yaml has no webhook %q (have %v)", name, Webhooks(doc))
	}
	if item.Post == nil {
		return nil, fmt.Errorf("openapi.yaml's webhook %q has no post operation", name)
	}
	return item.Post, nil
}

// CheckWebhook validates one webhook delivery as its receiver gets it, the
// request's headers and body, against the POST operation of doc's webhook
// name: every header parameter the operation declares (present and of its
// schema), the Content-Type, and the body against the operation's schema
// and as I-JSON. It returns every mismatch, or nil.
func CheckWebhook(ctx context.Context, doc *openapi3.T, name string, header http.Header, body []byte) error {
	item := doc.Webhooks[name]
	op, err := WebhookOperation(doc, name)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://receiver.invalid/", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", name, err)
	}
	req.Header = header.Clone()
	route := &routers.Route{Spec: doc, Path: name, PathItem: item, Method: http.MethodPost, Operation: op}
	in := &openapi3filter.RequestValidationInput{
		Request: req, Route: route,
		// A webhook operation declares no security (security: []): its
		// authentication is webhook-signature, a declared header.
		Options: &openapi3filter.Options{MultiError: true},
	}
	var problems []error
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		problems = append(problems, errors.New(oneLine(err)))
	}
	if !strictJSON(header.Get("Content-Type"), body) {
		problems = append(problems, errors.New("the body is not I-JSON (RFC 7493): a member name twice in one object, invalid UTF-8 or a lone surrogate escape"))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("webhook %s: the spec does not describe this delivery: %w\n  body: %s", name, errors.Join(problems...), clip(body))
}
