package providertest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Reply is one canned HTTP response.
type Reply struct {
	// Status is the HTTP status code (0: 200).
	Status int
	// Header holds extra response headers; Content-Type defaults to
	// application/json.
	Header map[string]string
	// File names a file under testdata/ whose bytes are the body.
	File string
	// Body is the body when File is empty.
	Body string
}

// Request is one request the server received.
type Request struct {
	Method string
	// Path is the escaped request path, as sent.
	Path   string
	Header http.Header
	Body   []byte
}

// Server replays replies in order and records every request. A request past
// the last reply fails the test and gets a 500.
type Server struct {
	*httptest.Server
	t       testing.TB
	mu      sync.Mutex
	replies []Reply
	reqs    []Request
}

// NewServer starts a loopback server replaying replies; it is closed when the
// test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("read request body: %v", err)
	}
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	if n >= len(s.replies) {
		s.t.Errorf("unexpected request %d to %s %s: only %d replies scripted", n+1, r.Method, r.URL.Path, len(s.replies))
		http.Error(w, `{"error":"no reply scripted"}`, http.StatusInternalServerError)
		return
	}
	rep := s.replies[n]
	w.Header().Set("Content-Type", "application/json")
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	out := []byte(rep.Body)
	if rep.File != "" {
		out = readTestdata(s.t, rep.File)
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// LastBody returns the body of the last request, failing the test if none came.
func (s *Server) LastBody() []byte {
	s.t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		s.t.Fatalf("no request reached the server")
	}
	return reqs[len(reqs)-1].Body
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return bytes.TrimSpace(raw)
}
