package webhook

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"time"
)

// submitLookupTimeout bounds the DNS lookup of CheckTarget.
const submitLookupTimeout = 3 * time.Second

// CheckTarget is the check of a webhook URL when a run is submitted:
// CheckURL, then the host is resolved (resolver nil: net.DefaultResolver)
// and refused unless at least one address is acceptable. The Sender checks
// again at every attempt, on the address it connects to; this check only
// tells the caller early. The *TargetError names no resolved address.
func (p Policy) CheckTarget(ctx context.Context, resolver Resolver, raw string) (*url.URL, error) {
	u, err := p.CheckURL(raw)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return u, nil // CheckURL checked the literal
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, submitLookupTimeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, refuse("host %q does not resolve", host)
	}
	for _, a := range addrs {
		if p.CheckAddr(a) == nil {
			return u, nil
		}
	}
	return nil, refuse("host %q resolves only to internal addresses", host)
}
