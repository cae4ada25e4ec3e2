package dynamo_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
)

// TestPutEventTouchesOnlyItsItem: the event-only write of a late notice is
// one conditional PutItem of the event's own item. A transaction with a
// ConditionCheck on the run's row (its first version) made a worker's
// concurrent write of that row fail with TransactionConflict, and its own
// cancellation by a conflict read as EConflict, which the store takes for
// "stored already" (review helper-65). Only a failed condition on the
// event's key is EConflict now; a conflict with a transaction on that item
// is an error to retry.
func TestPutEventTouchesOnlyItsItem(t *testing.T) {
	for _, tt := range []struct {
		name, answer string
		conflict     bool
	}{
		{"the number is taken", "ConditionalCheckFailedException", true},
		{"a transaction holds the item", "TransactionConflictException", false},
		{"stored", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var targets []string
			var body map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				targets = append(targets, r.Header.Get("X-Amz-Target"))
				b, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(b, &body)
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				if tt.answer == "" {
					_, _ = io.WriteString(w, `{}`)
					return
				}
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + tt.answer, "message": "no"})
			}))
			defer srv.Close()
			client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1})
			err := dynamo.NewTable(client, "t", dynamo.Options{}).PutEvent(t.Context(),
				runs.Event{RunID: "r1", Seq: 4, Type: runs.EventNotified, At: time.Now()})

			if len(targets) != 1 || targets[0] != "DynamoDB_20120810.PutItem" {
				t.Fatalf("requests %v, want one PutItem", targets)
			}
			if cond, _ := body["ConditionExpression"].(string); !strings.Contains(cond, "attribute_not_exists") {
				t.Errorf("condition %q, want the event's key not to exist", cond)
			}
			if got := runs.ErrorCode(err) == runs.EConflict; got != tt.conflict {
				t.Errorf("PutEvent = %v: EConflict %v, want %v", err, got, tt.conflict)
			}
			if tt.answer == "" && err != nil {
				t.Errorf("PutEvent = %v, want nil", err)
			}
		})
	}
}
