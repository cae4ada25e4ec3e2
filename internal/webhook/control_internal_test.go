package webhook

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
)

// TestDialerRefusesAtConnectTime checks the Control hook on its own: even
// if a future change let the dialer resolve a name by itself (and a DNS
// answer changed after the Sender's check), the address actually connected
// to is checked before connect, and nothing reaches the listener.
func TestDialerRefusesAtConnectTime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts <- struct{}{}
			c.Close()
		}
	}()
	signer, err := NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwOTk0MjY0NTY=")
	if err != nil {
		t.Fatal(err)
	}
	refusing, err := NewSender(SenderConfig{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		_, err := refusing.dialer.DialContext(context.Background(), "tcp", addr)
		var ae *addressError
		if !errors.As(err, &ae) {
			t.Errorf("dial %s: %v, want an address refusal", addr, err)
		}
	}
	// Then one connection the policy accepts: the listener must see exactly
	// that one (a refused dial that had connected would have come first).
	allowing, err := NewSender(SenderConfig{Signer: signer, Policy: Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := allowing.dialer.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("allow-listed dial: %v", err)
	}
	c.Close()
	<-accepts
	ln.Close()
	<-done
	if n := len(accepts); n != 0 {
		t.Errorf("listener accepted %d connections from refused dials", n)
	}

	for _, bad := range []string{"10.0.0.1:443", "[::1]:443", "[::ffff:127.0.0.1]:443", "[fe80::1%eth0]:443", "169.254.169.254:80", "nonsense"} {
		if err := refusing.control(context.Background(), "tcp", bad, nil); err == nil {
			t.Errorf("control(%s) = nil, want refused", bad)
		}
	}
	if err := refusing.control(context.Background(), "tcp", "93.184.216.34:443", nil); err != nil {
		t.Errorf("control(public address) = %v, want nil", err)
	}
}
