package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// rotationSecret is a second whsec_ secret, for a signer in the middle of a
// rotation (two signatures in webhook-signature).
const rotationSecret = "whsec_YS1zZWNvbmQta2V5LWZvci1yb3RhdGlvbi10ZXN0cyE="

// specRunID is a run id as the server generates them (32 hex digits).
const specRunID = "0193a7c2d4e5f60718293a4b5c6d7e8f"

// runEntering returns a run that has just entered the status event type t
// reports, subscribed to every event type at url, with what the store
// writes for that status (a suspension and its deadline, a hand-over, a
// termination reason).
func runEntering(t webhook.EventType, reason loop.TerminationReason, url string) *runs.Run {
	r := &runs.Run{ID: specRunID, Webhook: &runs.Subscription{URL: url}}
	deadline := eventTime.Add(24 * time.Hour)
	switch t {
	case webhook.EventWaitingForApproval:
		r.Status, r.SuspensionID, r.ApprovalDeadline = runs.StatusWaiting, "sus_0193a7c2d4e5f607", deadline
	case webhook.EventWaitingForToolResults:
		r.Status = runs.StatusWaitingForToolResults
		r.HandOver = &runs.HandOverRecord{ID: "sus_0193a7c2d4e5f608", At: eventTime, Deadline: deadline}
	case webhook.EventCompleted:
		r.Status, r.Reason = runs.StatusCompleted, reason
	case webhook.EventFailed:
		r.Status, r.Reason = runs.StatusFailed, reason
	case webhook.EventCancelled:
		r.Status, r.Reason = runs.StatusCancelled, reason
	case webhook.EventExpired:
		r.Status, r.Reason = runs.StatusExpired, reason
	}
	return r
}

// TestDeliveriesMatchSpec: for every event type, the request the sender
// posts is what openapi.yaml's webhooks entry of that type describes, its
// headers and its body. The delivery is built as the store builds it
// (webhook.Outbound with the route table's links, from a run entering the
// type's status) and sent by a Sender that signs with two secrets, as
// during a rotation; the receiver's copy is validated with kin-openapi.
func TestDeliveriesMatchSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.NewSigner(testSecret + "\n" + rotationSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, testSecret)
	s := newSender(t, webhook.SenderConfig{
		Signer: signer, Policy: webhook.Policy{Allow: loopbackOnly},
		Resolver: resolverFor("hooks.example.com", "127.0.0.1"), RootCAs: rc.pool(),
	})
	outbound := webhook.Outbound(routes.RunLinks)
	tests := []struct {
		typ    webhook.EventType
		reason loop.TerminationReason
	}{
		{webhook.EventWaitingForApproval, ""},
		{webhook.EventWaitingForToolResults, ""},
		{webhook.EventCompleted, loop.ReasonCompleted},
		{webhook.EventFailed, loop.ReasonProviderFailed},
		{webhook.EventFailed, loop.ReasonInterruptedWrite},
		{webhook.EventCancelled, loop.ReasonCancelled},
		{webhook.EventExpired, loop.ReasonApprovalExpired},
		{webhook.EventExpired, loop.ReasonApprovalUnmeetable},
		{webhook.EventExpired, loop.ReasonToolResultsExpired},
	}
	tested := map[webhook.EventType]bool{}
	for _, tt := range tests {
		tested[tt.typ] = true
		t.Run(string(tt.typ)+"/"+string(tt.reason), func(t *testing.T) {
			entries, err := outbound(runEntering(tt.typ, tt.reason, rc.url("hooks.example.com")), eventTime)
			if err != nil || len(entries) != 1 {
				t.Fatalf("Outbound = %d entries, %v; want one delivery", len(entries), err)
			}
			d, err := webhook.DeliveryOf(entries[0])
			if err != nil {
				t.Fatal(err)
			}
			before := len(rc.got())
			if a := send(t, s, d); a.Outcome != webhook.OutcomeDelivered {
				t.Fatalf("attempt = %+v, want delivered", a)
			}
			got := rc.got()
			if len(got) != before+1 {
				t.Fatalf("receiver got %d requests, want %d", len(got), before+1)
			}
			r := got[len(got)-1]
			if r.VerifyOK != nil {
				t.Errorf("reference library Verify: %v", r.VerifyOK)
			}
			if n := len(strings.Fields(r.Header.Get(webhook.HeaderSignature))); n != 2 {
				t.Errorf("webhook-signature holds %d signatures, want 2 (one per secret)", n)
			}
			if err := apispec.CheckWebhook(context.Background(), doc, string(tt.typ), r.Header, r.Body); err != nil {
				t.Error(err)
			}
			// The body and headers must match this entry only: a body
			// checked against another type's entry is refused.
			for _, other := range webhook.AllEventTypes() {
				if other != tt.typ && apispec.CheckWebhook(context.Background(), doc, string(other), r.Header, r.Body) == nil {
					t.Errorf("a %s delivery is also accepted as %s", tt.typ, other)
				}
			}
		})
	}
	for _, typ := range webhook.AllEventTypes() {
		if !tested[typ] {
			t.Errorf("no delivery of %s was checked against the spec", typ)
		}
	}
}

// TestSpecHasAWebhookPerEventType: openapi.yaml has one webhooks entry per
// event type the code sends and no other, and lists the same types as
// WebhookEventType (what POST /runs takes in webhook_events).
func TestSpecHasAWebhookPerEventType(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, typ := range webhook.AllEventTypes() {
		code = append(code, string(typ))
	}
	slices.Sort(code)
	if got := apispec.Webhooks(doc); !slices.Equal(got, code) {
		t.Errorf("openapi.yaml's webhooks are %v; the code sends %v", got, code)
	}
	ref := doc.Components.Schemas["WebhookEventType"]
	if ref == nil {
		t.Fatal("openapi.yaml has no WebhookEventType schema")
	}
	var enum []string
	for _, v := range ref.Value.Enum {
		enum = append(enum, fmt.Sprint(v))
	}
	slices.Sort(enum)
	if !slices.Equal(enum, code) {
		t.Errorf("openapi.yaml's WebhookEventType is %v; the code sends %v", enum, code)
	}
}

// TestWebhookSchemasMatchPayloadTypes compares the Go types that make a
// delivery's body with the spec's body schemas: the envelope's members are
// webhook.Payload's JSON fields, and the data members of all the entries
// together are webhook.RunData's, so a field added to RunData (which only
// some events may fill) must be described before it can be sent.
func TestWebhookSchemasMatchPayloadTypes(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	envelope := jsonNames(reflect.TypeFor[webhook.Payload]())
	data := jsonNames(reflect.TypeFor[webhook.RunData]())
	var allData []string
	for _, name := range apispec.Webhooks(doc) {
		op, err := apispec.WebhookOperation(doc, name)
		if err != nil {
			t.Fatal(err)
		}
		body := op.RequestBody.Value.Content.Get("application/json")
		if body == nil || body.Schema == nil {
			t.Fatalf("webhook %s: no application/json body", name)
		}
		if got := propertyNames(body.Schema.Value); !slices.Equal(got, envelope) {
			t.Errorf("webhook %s: body members %v; webhook.Payload has %v", name, got, envelope)
		}
		if p := body.Schema.Value.Properties["type"]; p == nil || p.Value.Const != name {
			t.Errorf("webhook %s: the body's type is not the constant %q", name, name)
		}
		if d := body.Schema.Value.Properties["data"]; d != nil {
			allData = append(allData, propertyNames(d.Value)...)
		}
	}
	slices.Sort(allData)
	allData = slices.Compact(allData)
	if !slices.Equal(allData, data) {
		t.Errorf("the webhooks' data members are %v; webhook.RunData has %v", allData, data)
	}
}

// TestWebhookAnswersMatchSpec: each answer a receiver may give, as every
// webhooks entry declares it (2XX, 410, anything else), has the outcome
// the entry describes: delivered, given up, retried per the schedule.
func TestWebhookAnswersMatchSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]struct {
		statuses []int
		outcome  webhook.Outcome
		state    webhook.DeliveryState
	}{
		"2XX":     {[]int{http.StatusOK, http.StatusAccepted, http.StatusNoContent}, webhook.OutcomeDelivered, webhook.DeliveryDelivered},
		"410":     {[]int{http.StatusGone}, webhook.OutcomeGone, webhook.DeliveryFailed},
		"default": {[]int{http.StatusMovedPermanently, http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}, webhook.OutcomeFailed, webhook.DeliveryPending},
	}
	var want []string
	for k := range answers {
		want = append(want, k)
	}
	slices.Sort(want)
	for _, name := range apispec.Webhooks(doc) {
		op, err := apispec.WebhookOperation(doc, name)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range op.Responses.Map() {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("webhook %s declares the answers %v; the sender tells apart %v", name, got, want)
		}
	}
	for key, a := range answers {
		for _, status := range a.statuses {
			t.Run(key+"/"+strconv.Itoa(status), func(t *testing.T) {
				rc := newReceiver(t, testSecret, status)
				d := newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com"))
				// The attempt is made when the event happened, so that the
				// schedule's window is not what decides.
				sender := newSender(t, webhook.SenderConfig{
					Policy: webhook.Policy{Allow: loopbackOnly}, Resolver: resolverFor("hooks.example.com", "127.0.0.1"),
					RootCAs: rc.pool(), Now: func() time.Time { return eventTime },
				})
				at := send(t, sender, d)
				if at.Outcome != a.outcome {
					t.Errorf("a %d answer: outcome %s, want %s", status, at.Outcome, a.outcome)
				}
				d.Record(at, webhook.DefaultSchedule)
				if d.State != a.state {
					t.Errorf("after a %d answer the delivery is %s, want %s", status, d.State, a.state)
				}
			})
		}
	}
}

// TestSpecAndREADMEGiveTheRetrySchedule: openapi.yaml's webhooks tag and
// the README give DefaultSchedule's delays.
func TestSpecAndREADMEGiveTheRetrySchedule(t *testing.T) {
	var delays []string
	s := webhook.DefaultSchedule
	s.Jitter = 0
	for n := 1; ; n++ {
		d, ok := s.Delay("msg", n)
		if !ok {
			break
		}
		delays = append(delays, humanDuration(d))
	}
	want := "retries after " + strings.Join(delays, ", ")
	if len(delays) != webhook.MaxAttempts-1 {
		t.Fatalf("%d delays, want %d", len(delays), webhook.MaxAttempts-1)
	}
	attempts := fmt.Sprintf("%d attempts", webhook.MaxAttempts)
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	var tag string
	for _, tg := range doc.Tags {
		if tg.Name == "webhooks" {
			tag = tg.Description
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"openapi.yaml's webhooks tag": tag, "README": string(readme)} {
		text = strings.Join(strings.Fields(text), " ")
		for _, w := range []string{want, attempts} {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not say %q", where, w)
			}
		}
	}
}

// humanDuration writes d as the README does: "4 min", "1 h 4 min", "6 h".
func humanDuration(d time.Duration) string {
	h, m := int(d.Hours()), int(d.Minutes())%60
	switch {
	case h == 0:
		return fmt.Sprintf("%d min", m)
	case m == 0:
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d h %d min", h, m)
}

// jsonNames returns a struct's JSON member names, sorted.
func jsonNames(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// propertyNames returns the properties a schema declares, its own and
// those of its allOf members, sorted.
func propertyNames(s *openapi3.Schema) []string {
	var out []string
	for p := range s.Properties {
		out = append(out, p)
	}
	for _, sub := range s.AllOf {
		out = append(out, propertyNames(sub.Value)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
