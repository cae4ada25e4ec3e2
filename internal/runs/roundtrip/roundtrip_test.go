package roundtrip_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs/roundtrip"
)

// TestLost: an answer cut off after its headers (the connection closed
// mid-body) counts as a round trip whose answer was lost; a whole answer,
// an API error among them, does not.
func TestLost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch strings.Trim(r.URL.Path, "/") {
		case "cut":
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 53\r\n\r\n{\"Consum")
			_ = buf.Flush()
		case "refused":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`))
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	c := roundtrip.New()
	put := func(answer string) error {
		client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL + "/" + answer),
			Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), RetryMaxAttempts: 1,
			APIOptions: []func(*middleware.Stack) error{c.Register}})
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("t"),
			Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
		return err
	}
	require.NoError(t, put("whole"))
	assert.Equal(t, 0, c.Lost())
	var refused *types.ConditionalCheckFailedException
	require.ErrorAs(t, put("refused"), &refused)
	assert.Equal(t, 0, c.Lost(), "an error the service sent is an answer")
	require.Error(t, put("cut"))
	assert.Equal(t, 1, c.Lost())
	assert.Equal(t, map[string]int{"DynamoDB.PutItem": 3}, c.ByOperation())
	c.Reset()
	assert.Equal(t, 0, c.Lost())
}
