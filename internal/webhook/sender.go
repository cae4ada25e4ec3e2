package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Limits of one attempt.
const (
	// DefaultTimeout bounds a whole attempt: connect, TLS, request and the
	// read of the answer.
	DefaultTimeout = 15 * time.Second
	// MaxResponseBody is how much of an answer is read; the rest is
	// dropped with the connection.
	MaxResponseBody = 4 << 10

	dialTimeout           = 5 * time.Second
	tlsHandshakeTimeout   = 5 * time.Second
	responseHeaderTimeout = 10 * time.Second
	maxResponseHeaderSize = 16 << 10
)

// Outcome classifies an attempt.
type Outcome string

// The outcomes of an attempt.
const (
	OutcomeDelivered Outcome = "delivered" // 2xx
	OutcomeFailed    Outcome = "failed"    // worth another attempt (other status, timeout, network)
	OutcomeRefused   Outcome = "refused"   // the target is not acceptable; no request was sent
	OutcomeGone      Outcome = "gone"      // 410: the receiver asked not to be sent more
)

// Error classes of an attempt (Attempt.Error): short, stable, and free of
// addresses, URLs and secrets, so they can go into the audit record.
const (
	ErrClassStatus         = "http_status"     // the receiver answered a non-2xx status
	ErrClassRedirect       = "redirect"        // a 3xx answer; redirects are not followed
	ErrClassTimeout        = "timeout"         // the attempt ran out of time
	ErrClassDNS            = "dns"             // the host name did not resolve
	ErrClassConnection     = "connection"      // connecting or talking failed
	ErrClassTLS            = "tls"             // handshake or certificate failed
	ErrClassRefusedURL     = "refused_url"     // the URL breaks the Policy
	ErrClassRefusedAddress = "refused_address" // the host resolves only to refused addresses
	ErrClassInternal       = "internal"        // signing failed, or the stored delivery could not be read
)

// Attempt is the record of one delivery attempt, fit for the audit stream:
// status code, latency and an error class; never the secret, the body, the
// URL or a resolved address.
type Attempt struct {
	// Number is 1 for the first attempt (set by Delivery.Record).
	Number     int       `json:"attempt"`
	At         time.Time `json:"at"`
	Outcome    Outcome   `json:"outcome"`
	StatusCode int       `json:"status_code,omitempty"`
	LatencyMS  int64     `json:"latency_ms"`
	Error      string    `json:"error,omitempty"`
}

// Resolver looks host names up; *net.Resolver is one. Tests give their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Signer signs every attempt (required): a *Signer, or a source that
	// re-reads a rotated secret.
	Signer SignerSource
	// Policy says which targets are accepted.
	Policy Policy
	// Resolver resolves target hosts; nil means net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// RootCAs verifies receivers' certificates; nil means the system pool.
	RootCAs *x509.CertPool
	// Now is the clock of webhook-timestamp; nil means time.Now. The
	// timestamp is the attempt's, as receivers check it against their
	// clock (5 minutes' tolerance in the reference library).
	Now func() time.Time
}

// Sender makes delivery attempts through an SSRF-safe HTTP client. It is
// safe for concurrent use; build one per process and reuse it.
type Sender struct {
	signer   SignerSource
	policy   Policy
	resolver Resolver
	timeout  time.Duration
	now      func() time.Time
	client   *http.Client
	dialer   *net.Dialer
}

// NewSender returns a Sender for cfg.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Signer == nil {
		return nil, errors.New("webhook sender: no signer")
	}
	s := &Sender{
		signer: cfg.Signer, policy: cfg.Policy, resolver: cfg.Resolver,
		timeout: cfg.Timeout, now: cfg.Now,
	}
	if s.resolver == nil {
		s.resolver = net.DefaultResolver
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.dialer = &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		// The last line of defence: whatever address the dialer is about
		// to connect to is checked again, on the socket, before connect.
		ControlContext: s.control,
	}
	transport := &http.Transport{
		// No proxy: a proxy would be dialled instead of the target, and
		// the target's addresses would go unchecked.
		Proxy:                  nil,
		DialContext:            s.dialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ResponseHeaderTimeout:  responseHeaderTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderSize,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
	}
	s.client = &http.Client{
		Transport: transport,
		// A redirect could point anywhere, including inside; the 3xx
		// answer is the attempt's result.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       s.timeout,
	}
	return s, nil
}

// Close drops idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Ready reports whether Send could sign an attempt now: nil, or the
// *SecretUnavailableError Send would return. It gets the signer as Send
// does (reading the secret when its source has to), and sends nothing. A
// sweep that makes several attempts at the same time asks it once before
// its first, so that they do not each ask for a secret that cannot be read.
func (s *Sender) Ready(ctx context.Context) error {
	if _, err := s.signer.CurrentSigner(ctx); err != nil {
		return secretUnavailable("", err)
	}
	return nil
}

// Send makes one attempt of d and returns its record: a failure of the
// attempt is an Attempt with an outcome other than delivered. It returns
// an error instead, a *SecretUnavailableError, when it cannot make the
// attempt because the signing secrets cannot be had now (the Secrets
// Manager secret could not be read): nothing was sent, and that is no
// attempt, as nothing about the receiver was learnt; the caller tries
// again later without counting it.
func (s *Sender) Send(ctx context.Context, d *Delivery) (Attempt, error) {
	start := s.now()
	a := Attempt{At: start}
	finish := func(o Outcome, class string, code int) (Attempt, error) {
		a.Outcome, a.Error, a.StatusCode = o, class, code
		a.LatencyMS = s.now().Sub(start).Milliseconds()
		return a, nil
	}
	u, err := s.policy.CheckURL(d.URL)
	if err != nil {
		return finish(OutcomeRefused, ErrClassRefusedURL, 0)
	}
	signer, err := s.signer.CurrentSigner(ctx)
	if err != nil {
		return Attempt{}, secretUnavailable("", err)
	}
	sig, err := signer.Sign(d.ID, start, d.Body)
	if err != nil {
		return finish(OutcomeFailed, ErrClassInternal, 0)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(d.Body))
	if err != nil {
		return finish(OutcomeRefused, ErrClassRefusedURL, 0)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentgate-webhooks/1")
	req.Header.Set(HeaderID, d.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(start.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)

	resp, err := s.client.Do(req)
	if err != nil {
		o, class := classify(err)
		return finish(o, class, 0)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBody))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return finish(OutcomeDelivered, "", code)
	case code == http.StatusGone:
		return finish(OutcomeGone, ErrClassStatus, code)
	case code >= 300 && code < 400:
		return finish(OutcomeFailed, ErrClassRedirect, code)
	default:
		return finish(OutcomeFailed, ErrClassStatus, code)
	}
}

// addressError is a refusal of a resolved address. Its detail (which
// address) is for this package only; the Attempt records just the class.
type addressError struct{ err error }

func (e *addressError) Error() string { return e.err.Error() }
func (e *addressError) Unwrap() error { return e.err }

func classify(err error) (Outcome, string) {
	var ae *addressError
	var te *TargetError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alert tls.AlertError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var netErr net.Error
	switch {
	case errors.As(err, &ae), errors.As(err, &te):
		return OutcomeRefused, ErrClassRefusedAddress
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return OutcomeFailed, ErrClassTimeout
		}
		return OutcomeFailed, ErrClassDNS
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alert),
		errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return OutcomeFailed, ErrClassTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return OutcomeFailed, ErrClassTimeout
	}
	return OutcomeFailed, ErrClassConnection
}

// dialContext resolves the target host itself, keeps the addresses the
// Policy accepts and dials them, by address, in the resolver's order. A
// host with no acceptable address is refused without any connection.
func (s *Sender) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("webhook dial %q: %w", addr, err)
	}
	port, ok := parsePort(portStr)
	if !ok {
		return nil, &addressError{refuse("invalid port %q", portStr)}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = s.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) {
				return nil, err
			}
			return nil, &net.DNSError{Err: err.Error(), Name: host}
		}
	}
	var accepted []netip.Addr
	var firstRefusal error
	for _, a := range addrs {
		if err := s.policy.CheckAddr(a); err != nil {
			if firstRefusal == nil {
				firstRefusal = err
			}
			continue
		}
		accepted = append(accepted, a)
	}
	if len(accepted) == 0 {
		if firstRefusal == nil {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
		return nil, &addressError{firstRefusal}
	}
	var lastErr error
	for _, a := range accepted {
		conn, err := s.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String()) //nolint:gosec // parsePort accepts 0–65535 only
		if err == nil {
			return conn, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// control runs on the socket before connect, with the address connected
// to: it refuses anything the Policy does not accept.
func (s *Sender) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &addressError{refuse("unparsable dial address")}
	}
	if err := s.policy.CheckAddr(ap.Addr()); err != nil {
		return &addressError{err}
	}
	return nil
}
