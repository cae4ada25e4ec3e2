package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/awswire"
)

// TestServeAWSConfigLogsAsJSON: the AWS SDK's log lines of serve's AWS
// configuration (here S3's "Response has no supported checksum", which an
// emulator's answer without a checksum header gets) go to serve's JSON log
// at their level, one JSON object per line, not as the SDK's default
// plain-text lines ("SDK 2026/12/05 ... DEBUG ...") on stderr.
func TestServeAWSConfigLogsAsJSON(t *testing.T) {
	s3srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, "state blob") // and no x-amz-checksum-* header
	}))
	defer s3srv.Close()
	dir := t.TempDir()
	t.Setenv("AWS_ENDPOINT_URL", s3srv.URL)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))

	// The SDK's default logger writes to os.Stderr as it is when the
	// configuration is loaded.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	prev := os.Stderr
	os.Stderr = stderr
	t.Cleanup(func() { os.Stderr = prev })

	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, err := loadAWSConfig(context.Background(), logger)
	require.NoError(t, err)
	out, err := awswire.NewS3(cfg).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, out.Body)
	_ = out.Body.Close()
	os.Stderr = prev

	written, err := os.ReadFile(stderr.Name())
	require.NoError(t, err)
	assert.Empty(t, string(written), "nothing on stderr")
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var entry struct{ Level, Msg, Component string }
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "not a JSON line: %q", line)
		if strings.Contains(entry.Msg, "no supported checksum") {
			found = true
			assert.Equal(t, "DEBUG", entry.Level)
			assert.Equal(t, "aws-sdk", entry.Component)
		}
	}
	assert.True(t, found, "the SDK's line is in the JSON log:\n%s", log.String())
}
