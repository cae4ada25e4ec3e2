package service_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
