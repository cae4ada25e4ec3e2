package awswire_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/awsenv"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/config"
)

// sesCall is one request the fake SES endpoint received.
type sesCall struct {
	path, contentType, authorization string
	body                             string
}

// fakeSES answers every request as SES would a send, by the request's
// protocol, and records it.
func fakeSES(t *testing.T, calls *[]sesCall) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		*calls = append(*calls, sesCall{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(body)})
		if r.URL.Path == "/" {
			_, _ = io.WriteString(w, `<SendEmailResponse><SendEmailResult><MessageId>m-1</MessageId></SendEmailResult></SendEmailResponse>`)
			return
		}
		_, _ = io.WriteString(w, `{"MessageId":"m-1"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestNewMailerSendsThroughTheConfiguredSESAPI: AGENTGATE_SES_API=v1 makes
// the functions' mailer send SES's first API's SendEmail (a form posted to
// /, at AWS_ENDPOINT_URL_SES when set), signed for ses; unset, SES v2's.
func TestNewMailerSendsThroughTheConfiguredSESAPI(t *testing.T) {
	for _, tt := range []struct {
		name        string
		api         string
		ownEndpoint string // AWS_ENDPOINT_URL_<SDKID> pointing at the fake
		path, ctype string
	}{
		{"default", "", "AWS_ENDPOINT_URL_SESV2", "/v2/email/outbound-emails", "application/json"},
		{"v2", "v2", "", "/v2/email/outbound-emails", "application/json"},
		{"v1", "v1", "", "/", "application/x-www-form-urlencoded"},
		{"v1 at its own endpoint", "v1", "AWS_ENDPOINT_URL_SES", "/", "application/x-www-form-urlencoded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls []sesCall
			srv := fakeSES(t, &calls)
			m := map[string]string{
				"AGENTGATE_MAIL_FROM": "approvals@example.com", "AGENTGATE_PUBLIC_BASE_URL": "https://approvals.example.com",
				"AGENTGATE_SES_API": tt.api,
				"AWS_REGION":        "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDMAIL", "AWS_SECRET_ACCESS_KEY": "secret",
				"AWS_ENDPOINT_URL": srv.URL,
			}
			if tt.ownEndpoint != "" {
				m["AWS_ENDPOINT_URL"] = "http://127.0.0.1:1" // nothing there: the service's own endpoint must win
				m[tt.ownEndpoint] = srv.URL
			}
			cfg, err := config.Load(env(m))
			if err != nil {
				t.Fatal(err)
			}
			awsCfg, err := awsenv.Load(env(m))
			if err != nil {
				t.Fatal(err)
			}
			mailer, err := awswire.NewMailer(cfg, awsCfg)
			if err != nil {
				t.Fatal(err)
			}
			msg := approval.Message{RunID: "run_1", SuspensionID: "susp_1", Approver: "alice@example.com", Initiator: "bob",
				Deadline: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC), Link: "https://approvals.example.com/approvals/x"}
			if err := mailer.Send(context.Background(), msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if len(calls) != 1 {
				t.Fatalf("%d calls, want 1", len(calls))
			}
			got := calls[0]
			if got.path != tt.path || got.contentType != tt.ctype || !strings.Contains(got.authorization, "AKIDMAIL/") ||
				!strings.Contains(got.authorization, "/eu-west-1/ses/aws4_request") {
				t.Errorf("call %s (%s) signed %q; want %s (%s) signed for ses in eu-west-1 by AKIDMAIL", got.path, got.contentType, got.authorization, tt.path, tt.ctype)
			}
			if tt.path == "/" {
				form, err := url.ParseQuery(got.body)
				if err != nil || form.Get("Action") != "SendEmail" || form.Get("Source") != "approvals@example.com" ||
					form.Get("Destination.ToAddresses.member.1") != "alice@example.com" {
					t.Errorf("form %v (%v), want SendEmail from approvals@example.com to alice@example.com", form, err)
				}
			}
		})
	}
}
