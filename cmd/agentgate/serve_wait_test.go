package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/gateway"
)

// TestCloseAnswersHeldRequests: a GET held by ?wait= is answered, with the
// run as it is, when the local server stops, instead of holding Shutdown
// until its grace period ends and then losing its connection.
func TestCloseAnswersHeldRequests(t *testing.T) {
	alice := gateway.NewToken()
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: t.TempDir(), tokens: map[string]string{alice: "alice"},
		logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &apitest.Caller{URL: s.URL, Token: alice, HTTP: &http.Client{}}
	var run runView
	if err := c.DoJSON(t.Context(), "POST", "/runs", map[string]any{"prompt": "x", "approvers": []string{"bob"}}, http.StatusAccepted, &run); err != nil {
		t.Fatal(err)
	}
	if err := c.DoJSON(t.Context(), "GET", "/runs/"+run.ID, nil, http.StatusOK, &run); err != nil {
		t.Fatal(err)
	}
	for run.Status != "WAITING_FOR_APPROVAL" {
		// The demo script holds its first turn for approval: wait for it,
		// so that nothing writes the run while the request below is held.
		path := fmt.Sprintf("/runs/%s?after_version=%d&wait=20", run.ID, run.Version)
		if err := c.DoJSON(t.Context(), "GET", path, nil, http.StatusOK, &run); err != nil {
			t.Fatal(err)
		}
	}
	held := make(chan error, 1)
	var got runView
	go func() {
		path := fmt.Sprintf("/runs/%s?after_version=%d&wait=20", run.ID, run.Version)
		held <- c.DoJSON(context.Background(), "GET", path, nil, http.StatusOK, &got)
	}()
	for s.App.Store.Waiters(run.ID) == 0 {
		runtime.Gosched()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the held request, when the server stopped: %v", err)
	}
	if got.Version != run.Version || got.Status != "WAITING_FOR_APPROVAL" {
		t.Errorf("the held request answered %+v, want the run as it was (version %d)", got, run.Version)
	}
}

// TestLinkBase: approval links use --public-url when given, else the listen
// address, where an unspecified host becomes localhost.
func TestLinkBase(t *testing.T) {
	for _, tt := range []struct{ public, addr, want string }{
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8080", "http://localhost:8080"},
		{"", "[::]:8080", "http://localhost:8080"},
		{"https://agentgate.example.com/", "0.0.0.0:8080", "https://agentgate.example.com"},
		{"https://example.com/gate", "0.0.0.0:8080", "https://example.com/gate"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := linkBase(tt.public, addr)
		if err != nil || got != tt.want {
			t.Errorf("linkBase(%q, %s) = %q, %v; want %q", tt.public, tt.addr, got, err, tt.want)
		}
	}
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:1")
	for _, bad := range []string{"ftp://x", "example.com", "https://x/?a=1", "https://x?", "https://u:p@x", "https://x/#f"} {
		if _, err := linkBase(bad, addr); err == nil {
			t.Errorf("linkBase(%q) accepted", bad)
		}
	}
}
