package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/approval"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaultsAndRequired(t *testing.T) {
	c, err := Load(env(map[string]string{EnvTable: "t", EnvBucket: "b", EnvPublicBaseURL: "https://x.example/prod/"}), EnvTable, EnvBucket)
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, c.ApprovalTTL)
	assert.Equal(t, 720*time.Hour, c.Retention)
	assert.Equal(t, 8, c.DueShards)
	assert.Equal(t, "https://x.example/prod", c.PublicBaseURL)
	assert.Equal(t, approval.SESv2, c.SESAPI)

	_, err = Load(env(map[string]string{EnvTable: "t"}), EnvTable, EnvBucket, EnvResumeFunction)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "AGENTGATE_BUCKET, AGENTGATE_RESUME_FUNCTION")
}

func TestLoadRejectsMalformed(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"ttl":               {EnvApprovalTTL: "soon"},
		"ttl low":           {EnvApprovalTTL: "1s"},
		"shards":            {EnvDueShards: "0"},
		"base url":          {EnvPublicBaseURL: "ftp://x"},
		"base url query":    {EnvPublicBaseURL: "https://x.example/?a=1"},
		"base url fragment": {EnvPublicBaseURL: "https://x.example/#top"},
		"retain":            {EnvRetention: "-1h"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(env(m))
			assert.Error(t, err)
		})
	}
}

// TestWebhookConcurrency: AGENTGATE_WEBHOOK_CONCURRENCY is the sweep's
// delivery concurrency, an integer from 1 to 64 (default 8); anything else
// is a start-up error naming the variable and what it wants.
func TestWebhookConcurrency(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    int
		wantErr string
	}{
		{"", 8, ""},
		{"1", 1, ""},
		{"20", 20, ""},
		{" 64 ", 64, ""},
		{"0", 0, `AGENTGATE_WEBHOOK_CONCURRENCY="0": want an integer from 1 to 64`},
		{"-3", 0, `AGENTGATE_WEBHOOK_CONCURRENCY="-3": want an integer from 1 to 64`},
		{"65", 0, `AGENTGATE_WEBHOOK_CONCURRENCY="65": want an integer from 1 to 64`},
		{"eight", 0, `AGENTGATE_WEBHOOK_CONCURRENCY="eight": want an integer from 1 to 64`},
		{"8.5", 0, `AGENTGATE_WEBHOOK_CONCURRENCY="8.5": want an integer from 1 to 64`},
	} {
		t.Run(tt.value, func(t *testing.T) {
			m := map[string]string{EnvWebhookConcurrency: tt.value}
			c, err := Load(env(m))
			alone, aloneErr := DeliveryConcurrencyFrom(env(m))
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				require.EqualError(t, aloneErr, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, aloneErr)
			assert.Equal(t, tt.want, c.DeliveryConcurrency)
			assert.Equal(t, tt.want, alone)
		})
	}
}

// TestSESAPI: AGENTGATE_SES_API picks the SES API of approval mail, v2
// (the default) or v1 (LocalStack Community has no SES v2); anything else
// stops start-up with an error naming the variable and what it wants.
func TestSESAPI(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    approval.SESAPI
		wantErr string
	}{
		{"", approval.SESv2, ""},
		{"v2", approval.SESv2, ""},
		{"v1", approval.SESv1, ""},
		{" V1 ", approval.SESv1, ""},
		{"sesv2", "", `AGENTGATE_SES_API="sesv2": want v2 (SES v2, the default) or v1`},
		{"1", "", `AGENTGATE_SES_API="1": want v2 (SES v2, the default) or v1`},
	} {
		t.Run(tt.value, func(t *testing.T) {
			c, err := Load(env(map[string]string{EnvSESAPI: tt.value}))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.SESAPI)
		})
	}
}

func TestPublicBaseURLWithAPasswordIsRefusedWithoutEchoingIt(t *testing.T) {
	_, err := Load(env(map[string]string{EnvPublicBaseURL: "https://user:SUPERSECRET@gate.example.com/"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "without user or password")
	assert.NotContains(t, err.Error(), "SUPERSECRET", "the error goes to the log")
}

// TestQuorumCheck: AGENTGATE_QUORUM_CHECK turns on the quorum checks a
// suspension schedules (off by default in this release); anything but on
// or off stops start-up with an error naming the variable and what it
// wants.
func TestQuorumCheck(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    bool
		wantErr string
	}{
		{"", false, ""},
		{"off", false, ""},
		{"on", true, ""},
		{" ON ", true, ""},
		{"true", false, `AGENTGATE_QUORUM_CHECK="true": want on or off (the default)`},
		{"1", false, `AGENTGATE_QUORUM_CHECK="1": want on or off (the default)`},
	} {
		t.Run(tt.value, func(t *testing.T) {
			c, err := Load(env(map[string]string{EnvQuorumCheck: tt.value}))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.QuorumChecks)
		})
	}
}

// TestQuorumCheckEvery: AGENTGATE_QUORUM_CHECK_EVERY is the quorum checks'
// interval, a Go duration from service.MinQuorumCheckEvery (1s) to
// service.MaxQuorumCheckEvery (24h), an hour when unset; anything else is
// a start-up error naming the variable and the range. QuorumCheckEveryFrom
// (serve on the embedded store) reads it the same way.
func TestQuorumCheckEvery(t *testing.T) {
	const wantRange = "want a Go duration from 1s to 24h0m0s"
	for _, tt := range []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", time.Hour, false},
		{"1s", time.Second, false},
		{"90s", 90 * time.Second, false},
		{"24h", 24 * time.Hour, false},
		{"999ms", 0, true},
		{"0", 0, true},
		{"-1h", 0, true},
		{"24h0m1s", 0, true},
		{"hourly", 0, true},
		{"60", 0, true},
	} {
		t.Run(tt.value, func(t *testing.T) {
			getenv := env(map[string]string{EnvQuorumCheckEvery: tt.value})
			c, err := Load(getenv)
			alone, aloneErr := QuorumCheckEveryFrom(getenv)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `AGENTGATE_QUORUM_CHECK_EVERY="`+tt.value+`": `+wantRange)
				require.Error(t, aloneErr)
				assert.Equal(t, err.Error(), aloneErr.Error())
				return
			}
			require.NoError(t, err)
			require.NoError(t, aloneErr)
			assert.Equal(t, tt.want, c.QuorumCheckEvery)
			assert.Equal(t, tt.want, alone)
		})
	}
}
