package soak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// server runs `agentgate serve` and kills and restarts it.
type server struct {
	bin  string
	args []string
	env  []string
	dir  string // logs go to dir/serve-N.log
	url  string
	// readyToken authenticates the readiness probe.
	readyToken string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start starts a new server process (the previous one must have exited).
func (s *server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	f, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("serve-%03d.log", s.starts)))
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...) //nolint:gosec // the soak runs the binary it was given
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), s.env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop asks the server to shut down (SIGTERM) and kills it after grace.
func (s *server) stop(grace time.Duration) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// alive reports whether the current process is still running.
func (s *server) alive() bool {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// waitReady polls the API until it answers an authenticated request.
func (s *server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/approvals?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+s.readyToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !s.alive() {
			return errors.New("the server exited while starting (see its log)")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not answer within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
