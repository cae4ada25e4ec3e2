package service_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// TestREADMEDeliveryBounds: the README gives the sweep's delivery
// concurrency and budget, and the attempts a sweep makes when every
// receiver takes its whole timeout, as the code has them.
func TestREADMEDeliveryBounds(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	n := service.DefaultDeliveryConcurrency
	// An attempt starts only if it can end within the budget: rounds of n
	// attempts start every timeout while one more fits.
	rounds := int((service.DefaultDeliveryBudget-webhook.DefaultTimeout)/webhook.DefaultTimeout) + 1
	for _, want := range []string{
		fmt.Sprintf("the deliveries of up to %d runs at the same time", n),
		fmt.Sprintf("(%d minutes of a sweep", int(service.DefaultDeliveryBudget.Minutes())),
		fmt.Sprintf("taking their whole %d s, a sweep makes %d attempts", int(webhook.DefaultTimeout.Seconds()), n*rounds),
		fmt.Sprintf("the webhook attempts of at most %d runs at the same time", n),
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README does not say %q", want)
		}
	}
}

// TestREADMEMailTimes: the README gives the grace after which the sweep
// sends a first approval mail its worker never recorded, the windows whose
// reminder comes before it, and the windows whose failed first mail is
// retried at the 80% point in the reminder's place (its 80% point no later
// than MailRetryDelay: tester helper-113 P3, the README said the reminder
// still followed), as the code has them.
func TestREADMEMailTimes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	for _, want := range []string{
		fmt.Sprintf("the run is due %s minutes after the suspension (`runs.FirstNoticeGrace`", spelled(int(runs.FirstNoticeGrace.Minutes()))),
		fmt.Sprintf("(windows under %d s), the reminder is the first mail", int((runs.FirstNoticeGrace * 10 / 8).Seconds())),
		fmt.Sprintf("except in a window of %d s or less, whose 80%% point comes no later than that minute", int((service.MailRetryDelay * 10 / 8).Seconds())),
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README does not say %q", want)
		}
	}
	if service.MailRetryDelay != time.Minute {
		t.Errorf("the README says the failed mail is sent again a minute later; MailRetryDelay is %s", service.MailRetryDelay)
	}
}

// spelled spells the small numbers the README writes out.
func spelled(n int) string {
	if words := []string{"zero", "one", "two", "three", "four", "five"}; n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}
