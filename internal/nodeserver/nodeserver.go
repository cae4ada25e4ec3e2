package nodeserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Dir is tools/npm relative to the repository root.
const Dir = "tools/npm"

// startTimeout bounds a server's start-up.
const startTimeout = 60 * time.Second

// Bin returns the path of an installed npm binary of tools/npm, or skips
// (fails under CI=true) when node or the packages are missing.
func Bin(t testing.TB, name string) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + fmt.Sprintf(" (install: npm ci --prefix %s)", Dir)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not on the PATH")
	}
	root, err := repoRoot()
	if err != nil {
		missing("%v", err)
	}
	bin := filepath.Join(root, Dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		missing("%s is not installed in %s", name, filepath.Join(root, Dir))
	}
	return bin
}

// Start runs bin with args and env (plus PORT=<a free loopback port>) in
// dir (empty: a temporary folder), waits until the port accepts
// connections and returns its base URL, http://127.0.0.1:<port>. The
// process is stopped when the test ends; its output is logged if the test
// failed.
func Start(t testing.TB, bin, dir string, env []string, args ...string) string {
	t.Helper()
	return StartAt(t, FreePort(t), bin, dir, env, args...)
}

// StartAt is Start on the given port (FreePort): a test can name the
// server's URL before the server runs (a server that is down, then up).
func StartAt(t testing.TB, port int, bin, dir string, env []string, args ...string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "PORT="+strconv.Itoa(port))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before listening on %s:\n%s", bin, addr, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within %s:\n%s", bin, addr, startTimeout, out.String())
		}
	}
}

// FreePort returns a loopback port that was free a moment ago (the child
// process binds it itself).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, Dir, "package.json")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s/package.json above the test's folder", Dir)
		}
		dir = parent
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
