package approval

import (
	"strings"
	"testing"
)

func TestCheckAddress(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"ops@example.com", true},
		{"first.last+tag@sub.example.co", true},
		// Found by FuzzCompose: the .eml's To: header carried raw UTF-8,
		// which RFC 5322 does not allow and SES does not send; identity
		// refuses such approvers anyway.
		{"jörg@example.de", false},
		{"ops@bücher.example", false},
		{"ops@xn--bcher-kva.example", true},
		{"", false},
		{"ops", false},
		{"Ops <ops@example.com>", false},
		{"<ops@example.com>", false},
		{"ops@example.com (ops)", false},
		{" ops@example.com", false},
		{"ops@example.com ", false},
		{"a@example.com, b@example.com", false},
		{"ops@example.com\r\nBcc: eve@example.com", false},
		{"ops@example.com\nBcc: eve@example.com", false},
		{"ops\u2028@example.com", false},
		{"ops@example.com\u2029", false},
		{"ops\u0085@example.com", false},
		{"ops\u00a0@example.com", false},
		{"ops\u200b@example.com", false},
		{"ops\u202e@example.com", false},
		{"ops\ufeff@example.com", false},
		{"ops\x00@example.com", false},
		{"ops\x7f@example.com", false},
		{"\"o p\"@example.com", false},
		{"ops@\xff.com", false},
		{strings.Repeat("a", 310) + "@example.com", false},
	}
	for _, tt := range tests {
		err := CheckAddress(tt.addr)
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddress(%q) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
}
