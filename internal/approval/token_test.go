package approval_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approval/approvaltest"
)

func TestNewToken(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 1000; i++ {
		raw, hash, err := approval.NewToken()
		if err != nil {
			t.Fatalf("NewToken: %v", err)
		}
		if len(raw) != approval.TokenLength {
			t.Fatalf("len(raw) = %d, want %d (raw %q)", len(raw), approval.TokenLength, raw)
		}
		if strings.Trim(raw, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("raw %q has characters outside base64url", raw)
		}
		sum := sha256.Sum256([]byte(raw))
		if want := hex.EncodeToString(sum[:]); hash != want {
			t.Fatalf("hash = %q, want sha256 hex %q", hash, want)
		}
		if got, ok := approval.HashToken(raw); !ok || got != hash {
			t.Fatalf("HashToken(raw) = %q, %v; want %q, true", got, ok, hash)
		}
		if seen[raw] {
			t.Fatalf("token %q issued twice", raw)
		}
		seen[raw] = true
	}
}

func TestHashTokenRejects(t *testing.T) {
	raw, _, err := approval.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	flip := func(c byte) string {
		if c == 'A' {
			return "B"
		}
		return "A"
	}
	tests := []struct {
		name string
		raw  string
	}{
		{"empty", ""},
		{"truncated", raw[:approval.TokenLength-1]},
		{"overlong", raw + "A"},
		{"padded", raw + "="},
		{"standard base64 plus", "+" + raw[1:]},
		{"standard base64 slash", raw[:10] + "/" + raw[11:]},
		{"space", raw[:20] + " " + raw[21:]},
		{"percent-encoded", raw[:20] + "%2F" + raw[23:]},
		{"non-ASCII", raw[:20] + "é" + raw[22:]},
		{"NUL", raw[:42] + "\x00"},
		{"trailing bits set", raw[:42] + "B"},
		{"path", "../../" + raw[6:]},
		{"hex sha256", strings.Repeat("ab", 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if hash, ok := approval.HashToken(tt.raw); ok || hash != "" {
				t.Errorf("HashToken(%q) = %q, %v; want \"\", false", tt.raw, hash, ok)
			}
		})
	}
	t.Run("tampered hashes differently", func(t *testing.T) {
		tampered := flip(raw[0]) + raw[1:]
		h1, ok1 := approval.HashToken(raw)
		h2, ok2 := approval.HashToken(tampered)
		if !ok1 || !ok2 || h1 == h2 {
			t.Errorf("HashToken(raw) = %q, %v; HashToken(tampered) = %q, %v; want two different hashes", h1, ok1, h2, ok2)
		}
	})
}

func TestLink(t *testing.T) {
	tests := []struct {
		base, want string
	}{
		{"https://gate.example.com", "https://gate.example.com/approvals/" + sampleToken},
		{"https://gate.example.com/", "https://gate.example.com/approvals/" + sampleToken},
		{"https://x.execute-api.us-east-1.amazonaws.com/prod//", "https://x.execute-api.us-east-1.amazonaws.com/prod/approvals/" + sampleToken},
		{"http://localhost:8080", "http://localhost:8080/approvals/" + sampleToken},
	}
	for _, tt := range tests {
		if got := approval.Link(tt.base, sampleToken); got != tt.want {
			t.Errorf("Link(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
}

func TestExtractLink(t *testing.T) {
	const base = "https://gate.example.com/prod"
	link := approval.Link(base, sampleToken)
	tests := []struct {
		name, body, base string
		want             string
		ok               bool
	}{
		{"text", "open:\n  " + link + "\n", base, link, true},
		{"html href", `<a href="` + link + `">x</a>`, base, link, true},
		{"base with slash", link, base + "/", link, true},
		{"other base", link, "https://evil.example.com", "", false},
		{"truncated token", base + "/approvals/" + sampleToken[:40] + " ", base, "", false},
		{"skips a bad one", base + "/approvals/short " + link, base, link, true},
		{"none", "no link here", base, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := approvaltest.ExtractLink(tt.body, tt.base)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ExtractLink = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
