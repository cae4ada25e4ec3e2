package s3state

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// wire is a fake HTTP client that records requests and answers with canned
// responses keyed by method.
type wire struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
	answer   func(r *http.Request) *http.Response
}

func (w *wire) Do(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	w.mu.Lock()
	w.requests = append(w.requests, r)
	w.bodies = append(w.bodies, body)
	w.mu.Unlock()
	resp := w.answer(r)
	resp.Request = r
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	if resp.Body == nil {
		resp.Body = io.NopCloser(strings.NewReader(""))
	}
	return resp, nil
}

func ok(*http.Request) *http.Response { return &http.Response{StatusCode: 200} }

func newTestBucket(w *wire, opts Options) *Bucket {
	client := s3.New(s3.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String("http://s3.test"),
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:       w,
		RetryMaxAttempts: 1,
	})
	return NewBucket(client, "state", opts)
}

func TestPutStateRequestsEncryption(t *testing.T) {
	state := []byte(`{"schema_version":1,"transcript":[]}`)
	tests := []struct {
		name    string
		opts    Options
		wantSSE string
		wantKey string
	}{
		{"SSE-S3 by default", Options{}, "AES256", ""},
		{"SSE-KMS with a key", Options{KMSKeyID: "alias/agentgate"}, "aws:kms", "alias/agentgate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &wire{answer: ok}
			ref, err := newTestBucket(w, tt.opts).PutState(t.Context(), "r1", state)
			require.NoError(t, err)
			require.Len(t, w.requests, 1)
			r := w.requests[0]
			assert.Equal(t, http.MethodPut, r.Method)
			assert.Equal(t, "/state/"+ref.Key, r.URL.Path)
			assert.Equal(t, tt.wantSSE, r.Header.Get("X-Amz-Server-Side-Encryption"))
			assert.Equal(t, tt.wantKey, r.Header.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"))
			assert.Equal(t, ref.SHA256, r.Header.Get("X-Amz-Meta-Sha256"))
			assert.Contains(t, string(w.bodies[0]), "\x1f\x8b", "the body is gzip")
			got, err := runs.DecodeBlob(ref, extractPayload(w.bodies[0]))
			require.NoError(t, err)
			assert.Equal(t, state, got)
		})
	}
}

// extractPayload strips aws-chunked framing, if the SDK used it.
func extractPayload(b []byte) []byte {
	if i := bytes.Index(b, []byte("\x1f\x8b")); i > 0 {
		b = b[i:]
		if j := bytes.Index(b, []byte("\r\n0\r\n")); j > 0 {
			b = b[:j]
		}
	}
	return b
}

//agentgate:megabytes
func TestPutStateRefusesOversizedState(t *testing.T) {
	w := &wire{answer: ok}
	_, err := newTestBucket(w, Options{}).PutState(t.Context(), "r1", runstest.Incompressible(runs.MaxStateSize+1))
	require.Error(t, err)
	assert.Equal(t, runs.ETooLarge, runs.ErrorCode(err))
	assert.Contains(t, runs.ErrorMessage(err), "over the 5242880-byte limit")
	assert.Empty(t, w.requests, "nothing goes on the wire")
}

func TestLoadStateFaults(t *testing.T) {
	ref, blob, err := runs.EncodeBlob("r1", []byte(`{"a":1}`))
	require.NoError(t, err)
	tests := []struct {
		name     string
		answer   func(*http.Request) *http.Response
		wantCode string
	}{
		{"stored", func(*http.Request) *http.Response {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(blob))}
		}, ""},
		{"missing", func(*http.Request) *http.Response {
			return &http.Response{StatusCode: 404, Header: http.Header{"Content-Type": {"application/xml"}},
				Body: io.NopCloser(strings.NewReader(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>gone</Message></Error>`))}
		}, runs.EGone},
		{"corrupted", func(*http.Request) *http.Response {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("garbage"))}
		}, runs.EInternal},
		{"service failure", func(*http.Request) *http.Response {
			return &http.Response{StatusCode: 403, Body: io.NopCloser(strings.NewReader(`<Error><Code>AccessDenied</Code></Error>`))}
		}, runs.EInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newTestBucket(&wire{answer: tt.answer}, Options{}).LoadState(t.Context(), ref)
			assert.Equal(t, tt.wantCode, runs.ErrorCode(err), "error: %v", err)
			if tt.wantCode == "" {
				assert.JSONEq(t, `{"a":1}`, string(got))
			}
		})
	}
}
