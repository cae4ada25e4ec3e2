package agentgate_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The tests below run scripts/infra-local.sh with stub `docker` and
// `docker-compose` commands first on PATH (no Docker engine is needed or
// touched) against a fake emulator: an HTTP server answering LocalStack's
// or moto's health path.

// stubDocker writes a `docker` that reports arch as the engine's
// architecture (`docker info`) and has no compose plugin.
func stubDocker(t *testing.T, bin, arch string) {
	t.Helper()
	writeStub(t, bin, "docker", `case "$1" in
info) [ "${2:-}" = --format ] && echo '`+arch+`'; exit 0 ;;
*) exit 1 ;;
esac
`)
}

func writeStub(t *testing.T, bin, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeEmulator serves path with 200 and everything else with 404, on addr
// (host:0), and returns its base URL, or "" when it cannot listen there.
func fakeEmulator(t *testing.T, addr, path string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Logf("listen on %s: %v", addr, err)
		return ""
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// infraLocal runs scripts/infra-local.sh with args, PATH starting at bin
// and env added to a clean environment; it returns stdout, stderr and
// whether it exited 0.
func infraLocal(t *testing.T, bin string, env []string, args ...string) (string, string, bool) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("scripts/infra-local.sh needs %s", tool)
		}
	}
	cmd := exec.Command("scripts/infra-local.sh", args...)
	cmd.Env = append([]string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"TMPDIR=" + t.TempDir()}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), err == nil
}

// TestInfraLocalContextOnLocalStack: a deploy onto LocalStack, which runs
// the functions in containers of their architecture on the Docker host,
// deploys the host's architecture (overridable) and mails approval links
// that reach LocalStack's API; onto moto, which runs no function, the stack
// keeps arm64 and the AWS stage URL. The deploy set neither: arm64
// functions failed on an x86 host ("exec format error") and the links
// pointed at execute-api.<region>.amazonaws.com (outside tester
// helper-113).
func TestInfraLocalContextOnLocalStack(t *testing.T) {
	localstack, moto := fakeEmulator(t, "127.0.0.1:0", "/_localstack/health"), fakeEmulator(t, "127.0.0.1:0", "/moto-api/")
	if localstack == "" || moto == "" {
		t.Fatal("cannot listen on 127.0.0.1")
	}
	port := localstack[strings.LastIndex(localstack, ":")+1:]
	localhostBase := "http://{apiId}.execute-api.localhost.localstack.cloud:" + port + "/{stage}"
	type contextCase struct {
		name       string
		endpoint   string
		dockerArch string
		env        []string
		want       map[string]string // "" = absent
		wantErr    string
	}
	tests := []contextCase{
		{"x86_64 Docker host", localstack, "x86_64", nil,
			map[string]string{"architecture": "x86_64", "publicBaseUrl": localhostBase, "sesApi": "v1"}, ""},
		{"arm64 Docker host", localstack, "aarch64", nil,
			map[string]string{"architecture": "arm64", "publicBaseUrl": localhostBase}, ""},
		{"INFRA_ARCH", localstack, "x86_64", []string{"INFRA_ARCH=arm64"},
			map[string]string{"architecture": "arm64"}, ""},
		{"INFRA_CONTEXT_JSON wins", localstack, "x86_64",
			[]string{`INFRA_CONTEXT_JSON={"architecture":"arm64","publicBaseUrl":"https://approvals.example.com"}`},
			map[string]string{"architecture": "arm64", "publicBaseUrl": "https://approvals.example.com"}, ""},
		{"unknown host architecture", localstack, "riscv64", nil, nil, "INFRA_ARCH"},
		{"moto", moto, "x86_64", nil,
			map[string]string{"architecture": "", "publicBaseUrl": "", "sesApi": "", "deletionProtection": "false"}, ""},
	}
	// An endpoint on another host than localhost gets LocalStack's path
	// form (the *.localhost.localstack.cloud names resolve to 127.0.0.1).
	if other := fakeEmulator(t, "127.0.0.2:0", "/_localstack/health"); other != "" {
		tests = append(tests, contextCase{"endpoint on another host", other, "x86_64", nil,
			map[string]string{"publicBaseUrl": other + "/restapis/{apiId}/{stage}/_user_request_"}, ""})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			stubDocker(t, bin, tt.dockerArch)
			env := append([]string{"AWS_ENDPOINT_URL=" + tt.endpoint, "INFRA_STACK=AgentgateTest"}, tt.env...)
			stdout, stderr, ok := infraLocal(t, bin, env, "context")
			if tt.wantErr != "" {
				if ok || !strings.Contains(stderr, tt.wantErr) {
					t.Fatalf("context: ok=%t, stderr %q, want a failure naming %s", ok, stderr, tt.wantErr)
				}
				return
			}
			if !ok {
				t.Fatalf("context failed: %s%s", stdout, stderr)
			}
			var ctx map[string]string
			if err := json.Unmarshal([]byte(stdout), &ctx); err != nil {
				t.Fatalf("context printed %q: %v", stdout, err)
			}
			if ctx["stackName"] != "AgentgateTest" {
				t.Errorf("stackName = %q, want AgentgateTest", ctx["stackName"])
			}
			for k, want := range tt.want {
				if got := ctx[k]; got != want {
					t.Errorf("%s = %q, want %q (context %s)", k, got, want, stdout)
				}
			}
		})
	}
}

// TestInfraLocalUpRefusesComposeV1: docker-compose 1.x refuses the compose
// file's top-level name and has no `up --wait`; `up` says so and starts
// nothing, where it ran `docker-compose ... up -d --wait` (outside tester
// helper-113). A standalone docker-compose of Compose v2 is used as is.
func TestInfraLocalUpRefusesComposeV1(t *testing.T) {
	for _, tt := range []struct {
		version string
		wantOK  bool
	}{{"1.29.2", false}, {"2.27.0", true}} {
		t.Run(tt.version, func(t *testing.T) {
			bin := t.TempDir()
			calls := filepath.Join(t.TempDir(), "calls")
			stubDocker(t, bin, "x86_64")
			writeStub(t, bin, "docker-compose", `if [ "$*" = "version --short" ]; then echo `+tt.version+`; exit 0; fi
echo "$*" >>`+calls+`
`)
			_, stderr, ok := infraLocal(t, bin, []string{"AWS_ENDPOINT_URL=http://localhost:1"}, "up")
			got, _ := os.ReadFile(calls)
			if !tt.wantOK {
				if ok || !strings.Contains(stderr, "Compose v2") || len(got) != 0 {
					t.Errorf("up with docker-compose %s: ok=%t, stderr %q, compose called with %q; want a failure naming Compose v2 and no call",
						tt.version, ok, stderr, got)
				}
				return
			}
			if want := "-f localstack/docker-compose.yml up -d --wait localstack\n"; !ok || string(got) != want {
				t.Errorf("up with docker-compose %s: ok=%t (%s), compose called with %q, want %q", tt.version, ok, stderr, got, want)
			}
		})
	}
}
