package webhook_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/webhook"
)

func TestCheckAddr(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.255.255",
		"172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.255.254",
		"169.254.0.1", "169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192",
		"192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::1", "fc00::1", "fd00:ec2::254", "fd12:3456::1",
		"fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1", "ff0e::1", "2001:db8::1", "2002:7f00:1::1",
		"2001::1", "100::1", "3fff::1",
	}
	for _, s := range refused {
		if err := (webhook.Policy{}).CheckAddr(netip.MustParseAddr(s)); err == nil {
			t.Errorf("CheckAddr(%s) = nil, want refused", s)
		}
	}
	accepted := []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "64:ff9b::808:808",
		"::ffff:8.8.8.8"} // an IPv4-mapped address is judged as its IPv4 address
	for _, s := range accepted {
		if err := (webhook.Policy{}).CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want accepted", s, err)
		}
	}
}

func TestAllowList(t *testing.T) {
	allow, err := webhook.ParseAllowList("127.0.0.1, 10.1.0.0/16 ::1 169.254.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	p := webhook.Policy{Allow: allow}
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "::1", "169.254.1.1", "::ffff:127.0.0.1", "::ffff:10.1.2.3"} {
		if err := p.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("allow-listed %s refused: %v", s, err)
		}
	}
	for _, s := range []string{"127.0.0.2", "10.2.0.1", "::ffff:127.0.0.2", "169.254.169.254", "::ffff:169.254.169.254", "169.254.170.2"} {
		if err := p.CheckAddr(netip.MustParseAddr(s)); err == nil {
			t.Errorf("%s accepted by an allow-list that does not name it", s)
		}
	}
	mapped, err := webhook.ParseAllowList("::ffff:127.0.0.1 ::ffff:10.9.0.0/112")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "10.9.3.4"} {
		if err := (webhook.Policy{Allow: mapped}).CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("an allow-list in IPv4-mapped form refuses %s: %v", s, err)
		}
	}
	exact, _ := webhook.ParseAllowList("169.254.169.254")
	if err := (webhook.Policy{Allow: exact}).CheckAddr(netip.MustParseAddr("169.254.169.254")); err != nil {
		t.Errorf("metadata address named exactly is still refused: %v", err)
	}
	for _, bad := range []string{"10.1.2.3/16", "nonsense", "fe80::1%eth0", "10.0.0.0/33"} {
		if _, err := webhook.ParseAllowList(bad); err == nil {
			t.Errorf("ParseAllowList(%q) accepted", bad)
		}
	}
}

func TestCheckURL(t *testing.T) {
	local := webhook.Policy{AllowHTTP: true, Allow: loopbackOnly}
	tests := []struct {
		name   string
		policy webhook.Policy
		url    string
		ok     bool
	}{
		{"https name", webhook.Policy{}, "https://hooks.example.com/agentgate?x=1", true},
		{"https name with port", webhook.Policy{}, "https://hooks.example.com:8443/a", true},
		{"http refused by default", webhook.Policy{}, "http://hooks.example.com/a", false},
		{"http when allowed", local, "http://hooks.example.com/a", true},
		{"other scheme", webhook.Policy{}, "ftp://hooks.example.com/a", false},
		{"no scheme", webhook.Policy{}, "hooks.example.com/a", false},
		{"relative", webhook.Policy{}, "/runs", false},
		{"empty", webhook.Policy{}, "", false},
		{"user info", webhook.Policy{}, "https://user:pass@hooks.example.com/a", false},
		{"fragment", webhook.Policy{}, "https://hooks.example.com/a#frag", false},
		{"invalid escape in the query", webhook.Policy{}, "https://hooks.example.com/a?a=1&b=%zz", false},
		{"a query", webhook.Policy{}, "https://hooks.example.com/a?a=1&b=%20", true},
		{"loopback literal", webhook.Policy{}, "https://127.0.0.1/a", false},
		{"private literal", webhook.Policy{}, "https://10.0.0.1/a", false},
		{"metadata literal", webhook.Policy{}, "http://169.254.169.254/latest/meta-data/", false},
		{"ipv6 loopback literal", webhook.Policy{}, "https://[::1]/a", false},
		{"ipv4-mapped literal", webhook.Policy{}, "https://[::ffff:127.0.0.1]/a", false},
		{"zoned literal", webhook.Policy{}, "https://[fe80::1%25eth0]/a", false},
		{"public literal", webhook.Policy{}, "https://93.184.216.34/a", false},
		{"decimal ipv4", webhook.Policy{}, "https://2130706433/a", false},
		{"short ipv4", webhook.Policy{}, "https://127.1/a", false},
		{"hex ipv4", webhook.Policy{}, "https://0x7f.0.0.1/a", false},
		{"octal ipv4", webhook.Policy{}, "https://0177.0.0.1/a", false},
		{"port zero", webhook.Policy{}, "https://hooks.example.com:0/a", false},
		{"too long", webhook.Policy{}, "https://hooks.example.com/" + strings.Repeat("a", webhook.MaxURLLength), false},
		{"allow-listed literal", local, "http://127.0.0.1:8080/a", true},
		{"literal outside the allow-list", local, "http://127.0.0.2:8080/a", false},
		{"allow-listed literal, ipv4-mapped", local, "http://[::ffff:127.0.0.1]:8080/a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.policy.CheckURL(tt.url)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckURL(%q) = %v, want ok=%v", tt.url, err, tt.ok)
			}
			var te *webhook.TargetError
			if err != nil && !errors.As(err, &te) {
				t.Errorf("error %v is not a *TargetError", err)
			}
		})
	}
}
