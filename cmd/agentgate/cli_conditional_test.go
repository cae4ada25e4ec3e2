package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunsWaitAsksConditionally: `runs wait` (client.Wait) against a server
// that answers at once, as the deployed API does, names the run it has on
// each request after the first (If-None-Match, the last ETag) and keeps it
// on 304, until the run changes.
func TestRunsWaitAsksConditionally(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string // If-None-Match per request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("If-None-Match"))
		n := len(sent)
		mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		if n < 3 {
			w.Header().Set("ETag", `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`)
			if r.Header.Get("If-None-Match") == `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"r1","status":"RUNNING","version":3}`)
			return
		}
		w.Header().Set("ETag", `"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"`)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"r1","status":"COMPLETED","termination_reason":"completed","version":4}`)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if code := run(ctx, []string{"runs", "wait", "r1", "--endpoint", srv.URL, "--token", "t"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "COMPLETED") {
		t.Errorf("stdout %q, want the completed run", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"", `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`, `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`}
	if strings.Join(sent, "|") != strings.Join(want, "|") {
		t.Errorf("If-None-Match sent %q, want %q", sent, want)
	}
}
