package lambdaentry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/service"
)

// Entry holds the handlers a function serves; nil ones are refused.
type Entry struct {
	API    func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	Worker func(ctx context.Context, job service.Job) error
	Sweep  func(ctx context.Context) (service.SweepSummary, error)
}

// probe holds the fields that tell the event kinds apart.
type probe struct {
	Job        *service.Job `json:"agentgate_job"`
	HTTPMethod string       `json:"httpMethod"`
	DetailType string       `json:"detail-type"`
	Source     string       `json:"source"`
}

// Handle serves one invocation.
func (e *Entry) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var p probe
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("unrecognised event: %w", err)
	}
	switch {
	case p.Job != nil && e.Worker != nil:
		return map[string]string{"status": "done"}, e.Worker(ctx, *p.Job)
	case p.HTTPMethod != "" && e.API != nil:
		var req events.APIGatewayProxyRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("decode API Gateway request: %w", err)
		}
		return e.API(ctx, req)
	case (p.Source == "aws.events" || p.DetailType == "Scheduled Event") && e.Sweep != nil:
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decode scheduled event: %w", err)
		}
		// The schedule carries nothing the sweep needs; its id and time tie
		// the sweep's log lines to the rule's invocation.
		slog.InfoContext(ctx, "scheduled sweep", "event_id", ev.ID, "scheduled_at", ev.Time)
		return e.Sweep(ctx)
	}
	return nil, fmt.Errorf("this function does not handle that event (job=%t http=%t scheduled=%t)", p.Job != nil, p.HTTPMethod != "", p.Source == "aws.events")
}
