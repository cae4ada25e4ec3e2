package runs

import (
	"strings"
	"testing"
)

func TestValidIdempotencyKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"", false},
		{"a", true},
		{"!~", true},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{`"quoted"`, true},
		{strings.Repeat("k", MaxIdempotencyKeyBytes), true},
		{strings.Repeat("k", MaxIdempotencyKeyBytes+1), false},
		{"two words", false},
		{"tab\t", false},
		{"del\x7f", false},
		{"nul\x00", false},
		{"caf\u00e9", false},
	}
	for _, tt := range tests {
		if got := ValidIdempotencyKey(tt.key); got != tt.want {
			t.Errorf("ValidIdempotencyKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

func TestIdempotencyKeyHashIsTheCallers(t *testing.T) {
	const role = "arn:aws:sts::123456789012:assumed-role/ci/"
	same := [][2]string{
		{role + "s1", role + "s2"},                               // sessions of one role
		{"Ann@Example.com", "ann@example.com"},                   // e-mail ignores case
		{"arn:aws:iam::123456789012:role/ci", role + "deploy-1"}, // a role and its session
	}
	for _, p := range same {
		if IdempotencyKeyHash(p[0], "k") != IdempotencyKeyHash(p[1], "k") {
			t.Errorf("%s and %s have different key scopes, want one", p[0], p[1])
		}
	}
	differ := [][2]string{{"alice", "bob"}, {"alice", "raw:alice"}, {role + "s1", "arn:aws:sts::123456789012:assumed-role/other/s1"}}
	for _, p := range differ {
		if IdempotencyKeyHash(p[0], "k") == IdempotencyKeyHash(p[1], "k") {
			t.Errorf("%s and %s share a key scope", p[0], p[1])
		}
	}
	if IdempotencyKeyHash("alice", "k1") == IdempotencyKeyHash("alice", "k2") {
		t.Error("two keys of one caller have one hash")
	}
}
