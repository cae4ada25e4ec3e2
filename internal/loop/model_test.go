package loop_test

import (
	"errors"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

func TestModelRequestModelFor(t *testing.T) {
	tests := []struct {
		name, model, want string
	}{
		{"none named: the configured model", "", "configured-1"},
		{"a bare model id", "gpt-4.1", "gpt-4.1"},
		{"the provider's spec prefix is dropped", "openai:gpt-4.1", "gpt-4.1"},
		{"another provider's prefix is kept", "bedrock:amazon.nova-pro-v1:0", "bedrock:amazon.nova-pro-v1:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (loop.ModelRequest{Model: tt.model}).ModelFor("openai", "configured-1"); got != tt.want {
				t.Errorf("ModelFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModelErrorKeepsTheSDKError(t *testing.T) {
	sdkErr := errors.New("sdk: throttled")
	var err error = &loop.ModelError{Message: "openai: HTTP 429 rate_limit_exceeded", Err: sdkErr}
	if err.Error() != "openai: HTTP 429 rate_limit_exceeded" {
		t.Errorf("Error() = %q, want the provider's message", err.Error())
	}
	if !errors.Is(err, sdkErr) {
		t.Error("the SDK's error is not reachable with errors.Is")
	}
}
