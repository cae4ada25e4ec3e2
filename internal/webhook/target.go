package webhook

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// MaxURLLength bounds a webhook URL.
const MaxURLLength = 2048

// Policy says which webhook targets a deployment accepts. The zero Policy
// is the production one: https only, public addresses only.
type Policy struct {
	// AllowHTTP permits plain-http URLs (the local server, told so by
	// --webhook-allow-http).
	AllowHTTP bool
	// Allow lists address prefixes that are accepted although they are
	// refused by default (loopback, private, ...). A cloud metadata address
	// is accepted only when an entry names exactly that address: a broad
	// prefix such as 169.254.0.0/16 does not unlock it.
	Allow []netip.Prefix
}

// TargetError says why a target (URL or address) is refused. Its message is
// safe to show to the caller who gave the URL: it names no address the
// caller's host name resolved to.
type TargetError struct {
	Message string
}

// Error implements the error interface.
func (e *TargetError) Error() string { return "webhook target refused: " + e.Message }

func refuse(format string, args ...any) *TargetError {
	return &TargetError{Message: fmt.Sprintf(format, args...)}
}

// ParseAllowList parses a comma- or space-separated list of address
// prefixes ("10.1.0.0/16") and single addresses ("127.0.0.1", "::1").
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("webhook allow-list entry %q: %w", f, err)
			}
			if p != p.Masked() {
				return nil, fmt.Errorf("webhook allow-list entry %q: host bits set (did you mean %s?)", f, p.Masked())
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				// Addresses are judged in their IPv4 form (CheckAddr): so
				// is an entry written in IPv4-mapped form.
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("webhook allow-list entry %q: want an address or a prefix", f)
		}
		if a.Zone() != "" {
			return nil, fmt.Errorf("webhook allow-list entry %q: zoned addresses are not supported", f)
		}
		a = a.Unmap() // judged in IPv4 form, as CheckAddr judges addresses
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// refusedRange is an address range no webhook is sent to by default.
type refusedRange struct {
	prefix netip.Prefix
	what   string
}

func r(p, what string) refusedRange { return refusedRange{netip.MustParsePrefix(p), what} }

// refusedRanges are the special-purpose ranges of the IANA registries that
// are not public unicast destinations.
var refusedRanges = []refusedRange{
	r("0.0.0.0/8", "unspecified"),
	r("10.0.0.0/8", "private"),
	r("100.64.0.0/10", "shared (CGNAT)"),
	r("127.0.0.0/8", "loopback"),
	r("169.254.0.0/16", "link-local"),
	r("172.16.0.0/12", "private"),
	r("192.0.0.0/24", "IETF protocol assignment"),
	r("192.0.2.0/24", "documentation"),
	r("192.88.99.0/24", "6to4 relay"),
	r("192.168.0.0/16", "private"),
	r("198.18.0.0/15", "benchmarking"),
	r("198.51.100.0/24", "documentation"),
	r("203.0.113.0/24", "documentation"),
	r("224.0.0.0/4", "multicast"),
	r("240.0.0.0/4", "reserved"),
	r("::/128", "unspecified"),
	r("::1/128", "loopback"),
	r("::/96", "IPv4-compatible"),
	r("::ffff:0:0/96", "IPv4-mapped"),
	r("::ffff:0:0:0/96", "IPv4-translated"),
	r("64:ff9b:1::/48", "local NAT64"),
	r("100::/64", "discard"),
	r("2001::/23", "IETF protocol assignment"),
	r("2001:db8::/32", "documentation"),
	r("2002::/16", "6to4"),
	r("3fff::/20", "documentation"),
	r("5f00::/16", "segment routing"),
	r("fc00::/7", "unique local"),
	r("fe80::/10", "link-local"),
	r("fec0::/10", "site-local"),
	r("ff00::/8", "multicast"),
}

// nat64 is the well-known NAT64 prefix (RFC 6052): DNS64 resolvers answer
// it for IPv4-only hosts, so the embedded IPv4 address is what is checked.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// metadataAddrs are the instance and task metadata endpoints of the cloud
// providers (AWS IMDS IPv4 and IPv6, ECS task metadata, EKS pod identity,
// Alibaba Cloud, Oracle Cloud). They fall into refused ranges anyway; they
// are listed so that only an exact allow-list entry unlocks one.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("169.254.170.23"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("fd00:ec2::23"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("192.0.0.192"),
}

// allowed reports whether the allow-list accepts a.
func (p Policy) allowed(a netip.Addr) bool {
	for _, m := range metadataAddrs {
		if a == m {
			for _, pre := range p.Allow {
				if pre.IsSingleIP() && pre.Addr() == a {
					return true
				}
			}
			return false
		}
	}
	for _, pre := range p.Allow {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// CheckAddr returns nil if a webhook may be sent to a, and a *TargetError
// saying which kind of address it is otherwise.
func (p Policy) CheckAddr(a netip.Addr) error {
	if !a.IsValid() {
		return refuse("invalid address")
	}
	if a.Zone() != "" {
		// netip.Prefix.Contains is false for every zoned address: refuse
		// them before any range check could be fooled.
		return refuse("address %s has a zone", a)
	}
	if a.Is4In6() {
		// An IPv4-mapped IPv6 address is the IPv4 address (a socket to it
		// reaches that host): judge it as one. Go's resolver gives names
		// from /etc/hosts, such as localhost, in this form.
		return p.CheckAddr(a.Unmap())
	}
	if p.allowed(a) {
		return nil
	}
	if nat64.Contains(a) {
		b := a.As16()
		return p.CheckAddr(netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, m := range metadataAddrs {
		if a == m {
			return refuse("address %s is a cloud metadata endpoint", a)
		}
	}
	for _, rr := range refusedRanges {
		if rr.prefix.Contains(a) {
			return refuse("address %s is %s", a, rr.what)
		}
	}
	// A backstop in case the table above misses something the standard
	// library knows about.
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.Is4In6() {
		return refuse("address %s is not public", a)
	}
	return nil
}

// CheckURL parses raw and returns it if it is an acceptable webhook target:
// absolute https (or http when AllowHTTP), a host name (an IP literal only
// when the allow-list accepts it), no user info, no fragment, at most
// MaxURLLength bytes. It does not resolve the host; the Sender checks every
// address at dial time.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, refuse("empty URL")
	}
	if len(raw) > MaxURLLength {
		return nil, refuse("URL longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, refuse("not a URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.AllowHTTP {
			return nil, refuse("plain http is not allowed, use https")
		}
	default:
		return nil, refuse("scheme %q, want https", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, refuse("URL has no host")
	}
	if u.User != nil {
		return nil, refuse("URL carries user info")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, refuse("URL has a fragment")
	}
	if _, err := url.QueryUnescape(u.RawQuery); err != nil {
		return nil, refuse("URL query has an invalid %%-escape")
	}
	host := u.Hostname()
	if host == "" {
		return nil, refuse("URL has no host")
	}
	if port := u.Port(); port != "" {
		if n, ok := parsePort(port); !ok || n == 0 {
			return nil, refuse("invalid port %q", port)
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.CheckAddr(a); err != nil {
			return nil, err
		}
		if !p.allowed(a.Unmap()) {
			return nil, refuse("an IP address as host is accepted only when the allow-list names it; use a DNS name")
		}
		return u, nil
	}
	if looksNumeric(host) {
		return nil, refuse("host %q looks like an IP address in a non-standard form", host)
	}
	return u, nil
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}

// looksNumeric reports whether host's last label is all digits or a hex
// number: no DNS name ends like that, but some resolvers read such hosts as
// IPv4 addresses ("2130706433", "0x7f.1", "127.1").
func looksNumeric(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if l := strings.ToLower(last); strings.HasPrefix(l, "0x") {
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
