package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaultsAndRequired(t *testing.T) {
	c, err := Load(env(map[string]string{EnvTable: "t", EnvBucket: "b", EnvPublicBaseURL: "https://x.example/prod/"}), EnvTable, EnvBucket)
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, c.ApprovalTTL)
	assert.Equal(t, 720*time.Hour, c.Retention)
	assert.Equal(t, 8, c.DueShards)
	assert.Equal(t, "https://x.example/prod", c.PublicBaseURL)

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

func TestPublicBaseURLWithAPasswordIsRefusedWithoutEchoingIt(t *testing.T) {
	_, err := Load(env(map[string]string{EnvPublicBaseURL: "https://user:SUPERSECRET@gate.example.com/"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "without user or password")
	assert.NotContains(t, err.Error(), "SUPERSECRET", "the error goes to the log")
}
