package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// RemoteFunction invokes a Lambda function through the Runtime Interface
// Emulator's (or Lambda's) invoke API: POST {BaseURL}/2015-03-31/functions/function/invocations.
type RemoteFunction struct {
	BaseURL string
	Client  *http.Client
	// mu serialises invocations: like one Lambda execution environment, the
	// emulator runs one invocation at a time and refuses a second.
	mu sync.Mutex
}

// lambdaError is the body the runtime returns when the handler failed.
type lambdaError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// Invoke sends the payload and returns the function's response payload. A
// handler error (HTTP 200 with an errorMessage body) is returned as an error.
func (f *RemoteFunction) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.BaseURL+"/2015-03-31/functions/function/invocations", bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req) //nolint:gosec // the URL is the emulator's, from the gateway's own configuration
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", f.BaseURL, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: read response: %w", f.BaseURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke %s: HTTP %d: %s", f.BaseURL, resp.StatusCode, bytes.TrimSpace(out))
	}
	var le lambdaError
	if json.Unmarshal(out, &le) == nil && le.ErrorMessage != "" {
		return nil, fmt.Errorf("invoke %s: function error %s: %s", f.BaseURL, le.ErrorType, le.ErrorMessage)
	}
	return out, nil
}

// Handler returns a proxy Handler that calls the remote function.
func (f *RemoteFunction) Handler() Handler {
	return func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		payload, err := json.Marshal(req)
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
		out, err := f.Invoke(ctx, payload)
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
		var resp events.APIGatewayProxyResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			return events.APIGatewayProxyResponse{}, fmt.Errorf("invoke %s: response is not a proxy response: %w", f.BaseURL, err)
		}
		return resp, nil
	}
}
