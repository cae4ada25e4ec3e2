package agentgate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeLocalStart runs the README's local start ("Using it
// locally") as it is written, against a binary built from this tree: its
// commands make two random tokens in $ALICE and $BOB, write them to a
// .agentgate-tokens file of mode 0600 and start serve with that file. The
// snippet is taken from README.md, so what is tested is what the README
// says; only `go run ./cmd/agentgate` becomes the built binary and the
// listen address port 0, so the test needs no free fixed port. The tokens
// the shell holds must then authenticate alice and bob, and nothing else
// may. AGENTGATE_BIN names an agentgate binary built from this tree to run
// instead (scripts/test.sh builds one for its own use and passes it on).
func TestReadmeLocalStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/agentgate and starts it")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("the README's snippet needs openssl")
	}
	setup, serve := localStartSnippet(t)

	dir := t.TempDir()
	bin := os.Getenv("AGENTGATE_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "agentgate")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/agentgate").CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/agentgate: %v\n%s", err, out)
		}
	}
	// The binary's path reaches the shell as a variable, not as code.
	serve = strings.Replace(serve, "go run ./cmd/agentgate", `"$AGENTGATE_UNDER_TEST"`, 1)
	serve = addrFlag.ReplaceAllString(serve, "--addr 127.0.0.1:0")

	// The setup lines run as they are, in one shell with the server, which
	// replaces the shell (exec) once the shell has said what $ALICE and
	// $BOB hold.
	script := "set -eu\n" + setup + "\nprintf 'ALICE=%s\\nBOB=%s\\n' \"$ALICE\" \"$BOB\"\nexec " + serve + "\n"
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTGATE_UNDER_TEST="+bin)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The server, and anything the shell left, by process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})

	vars, base := readStart(t, stdout)
	alice, bob := vars["ALICE"], vars["BOB"]
	for name, tok := range map[string]string{"ALICE": alice, "BOB": bob} {
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tok) {
			t.Fatalf("$%s = %q, want 32 hex digits", name, tok)
		}
	}
	if alice == bob {
		t.Fatal("$ALICE and $BOB are the same token")
	}

	fi, err := os.Stat(filepath.Join(dir, ".agentgate-tokens"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf(".agentgate-tokens has mode %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(filepath.Join(dir, ".agentgate-tokens"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "alice=" + alice + "\nbob=" + bob + "\n"; string(b) != want {
		t.Errorf(".agentgate-tokens = %q, want %q", b, want)
	}

	// Each token is its principal's; a wrong one, or none, is refused.
	for _, tt := range []struct{ name, token string }{{"alice", alice}, {"bob", bob}} {
		if status, body := call(t, "GET", base+"/approvals", tt.token, ""); status != http.StatusOK {
			t.Errorf("GET /approvals with $%s: %d %s, want 200", strings.ToUpper(tt.name), status, body)
		}
	}
	for _, tok := range []string{"", alice + "x", strings.Repeat("0", 32)} {
		if status, _ := call(t, "GET", base+"/approvals", tok, ""); status != http.StatusUnauthorized {
			t.Errorf("GET /approvals with token %q: %d, want 401", tok, status)
		}
	}
	status, body := call(t, "POST", base+"/runs", alice, `{"prompt":"update pricing","approvers":["bob"]}`)
	if status != http.StatusAccepted {
		t.Fatalf("POST /runs with $ALICE: %d %s, want 202", status, body)
	}
	var started struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &started); err != nil || started.ID == "" {
		t.Fatalf("POST /runs answered %s: no run id (%v)", body, err)
	}
	// bob, an approver of alice's run, may read it, and sees alice started it.
	status, body = call(t, "GET", base+"/runs/"+started.ID, bob, "")
	var run struct {
		Initiator string `json:"initiator"`
	}
	if err := json.Unmarshal([]byte(body), &run); status != http.StatusOK || err != nil || run.Initiator != "alice" {
		t.Errorf("GET /runs/%s with $BOB: %d %s, want 200 with initiator alice", started.ID, status, body)
	}
}

// addrFlag is the listen address the README's serve line gives.
var addrFlag = regexp.MustCompile(`--addr [^ ]+`)

// localStartSnippet returns the first sh block of README's "Using it
// locally" section: its lines before the serve command (setup) and the
// serve command, which must be `go run ./cmd/agentgate serve` with an
// --addr and the last line of the block.
func localStartSnippet(t *testing.T) (setup, serve string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Using it locally\n")
	if !ok {
		t.Fatal(`README.md has no "## Using it locally" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal(`README's "Using it locally" has no sh block`)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal(`README's "Using it locally" sh block is not closed`)
	}
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	serve = lines[len(lines)-1]
	if !strings.HasPrefix(serve, "go run ./cmd/agentgate serve ") || len(addrFlag.FindAllString(serve, -1)) != 1 {
		t.Fatalf("the block's last line %q is not `go run ./cmd/agentgate serve` with one --addr", serve)
	}
	return strings.Join(lines[:len(lines)-1], "\n"), serve
}

// readStart reads the shell's NAME=value lines and then the server's
// output up to its "agentgate serving on URL" line, and returns the values
// and the URL; the rest of the output is drained.
func readStart(t *testing.T, stdout io.Reader) (map[string]string, string) {
	t.Helper()
	type started struct {
		vars map[string]string
		url  string
		err  error
	}
	done := make(chan started, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		vars := map[string]string{}
		for sc.Scan() {
			line := sc.Text()
			if k, v, ok := strings.Cut(line, "="); ok && (k == "ALICE" || k == "BOB") {
				vars[k] = v
				continue
			}
			if rest, ok := strings.CutPrefix(line, "agentgate serving on "); ok {
				url, _, _ := strings.Cut(rest, " ")
				done <- started{vars: vars, url: url}
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		done <- started{err: fmt.Errorf("the output ended before the server said where it serves (read error: %w)", sc.Err())}
	}()
	select {
	case s := <-done:
		if s.err != nil {
			t.Fatal(s.err)
		}
		return s.vars, s.url
	case <-time.After(2 * time.Minute):
		t.Fatal("the server did not start within 2 minutes")
	}
	return nil, ""
}

// call makes one request with a bearer token ("": none) and returns the
// status and body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
