package webhook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// A receiver verifies a delivery with the Standard Webhooks reference
// library and the secret it shares with the deployment, then deduplicates
// on webhook-id (a delivery may arrive more than once).
func Example_receiver() {
	wh, err := standardwebhooks.NewWebhook(testSecret) // the whsec_... secret
	if err != nil {
		panic(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil || wh.Verify(body, r.Header) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		fmt.Println(p.Type, p.Data.RunID, p.Data.Status, p.Data.Reason)
		w.WriteHeader(http.StatusNoContent)
	})

	// What agentgate sends (built here with the package, as the worker does).
	d, _ := webhook.NewDelivery(webhook.Event{
		Type: webhook.EventCompleted, At: time.Now(),
		Run: webhook.RunData{RunID: "run_1", Status: runs.StatusCompleted, Reason: loop.ReasonCompleted},
	}, "https://hooks.example.com/agentgate")
	signer, _ := webhook.NewSigner(testSecret)
	now := time.Now()
	sig, _ := signer.Sign(d.ID, now, d.Body)
	req := httptest.NewRequest(http.MethodPost, d.URL, strings.NewReader(string(d.Body)))
	req.Header.Set(webhook.HeaderID, d.ID)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// run.completed run_1 COMPLETED completed
	// 204
}
