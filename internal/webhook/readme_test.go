package webhook_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/webhook"
)

// TestREADMEWithoutASecret: the README's "Without a secret" paragraph gives
// the code's postponement, the default schedule's span and the errors of a
// delivery given up.
func TestREADMEWithoutASecret(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(b), "\nWithout a secret. ")
	if !ok {
		t.Fatal(`README has no "Without a secret." paragraph`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	span := webhook.DefaultSchedule.Span()
	for _, want := range []string{
		fmt.Sprintf("postponed by %d minutes", int(webhook.NoSecretRetry.Minutes())),
		fmt.Sprintf("within %d minutes", int(webhook.NoSecretRetry.Minutes())),
		fmt.Sprintf("(%d h %d min,", int(span.Hours()), int(span.Minutes())%60),
		"`webhook_given_up`", "`error: not_configured`", "`error: secret_unavailable`",
	} {
		if !strings.Contains(para, want) {
			t.Errorf("README's Without a secret paragraph does not say %q", want)
		}
	}
}
