//go:build integration

package main

// The approval page in a real browser: headless Chromium, driven by chromedp,
// opens the link from the approval mail, clicks Approve or types a reason
// and clicks Deny, and reads the outcome page.

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/provider/scripted"
)

// browserWait bounds each browser step.
const browserWait = 30 * time.Second

// TestApprovalLinkInBrowserApprove: the approver opens the mailed link,
// sees the call and its diff, clicks Approve and sees the outcome; the run
// completes with the write done once. Opening the link again shows
// "already approved".
func TestApprovalLinkInBrowserApprove(t *testing.T) {
	browser := newBrowser(t)
	ls := startLinkServer(t, linkServerOptions{})
	run, link := ls.suspend(nil)
	evCount := len(ls.alice.events(run.ID))

	resp, err := chromedp.Run(browser.step(), chromedp.NavigateResponse(link))
	require.NoError(t, err)
	require.EqualValues(t, 200, resp.Status)
	assert.Equal(t, "no-referrer", resp.Headers["Referrer-Policy"], "headers as the browser saw them")
	assert.Contains(t, resp.Headers["Content-Security-Policy"], "default-src 'none'")
	require.NoError(t, chromedp.Do(browser.step(), chromedp.WaitVisible(chromedp.CSS("button.approve"), chromedp.NodeVisible)))
	text := browser.text(t, "main")
	for _, want := range []string{"Approve or deny this agent run's next step", "write_document", linkApprover,
		"-- Team: 10 EUR per user and month", "+- Team: 12 EUR per user and month"} {
		assert.Contains(t, text, want, "the confirm page as rendered")
	}
	browser.screenshot(t, "confirm.png")
	ls.requireUnchanged(run, evCount) // opening the page in a browser decides nothing

	resp, err = chromedp.RunResponse(browser.step(), chromedp.Click(chromedp.CSS("button.approve"), chromedp.NodeVisible))
	require.NoError(t, err)
	require.EqualValues(t, 200, resp.Status, "the POST's answer")
	text = browser.text(t, "main")
	assert.Contains(t, text, "Your decision was recorded")
	assert.Contains(t, text, "Approved. The run continues.")
	done := ls.alice.waitStatus(run.ID, "COMPLETED")
	require.NotNil(t, done.Decision)
	assert.Equal(t, linkApprover, done.Decision.By)
	assert.Equal(t, "link", done.Decision.Via)
	assert.Equal(t, 1, toolExecutions(t, ls.alice.events(run.ID), "write_document"), "the write ran once")
	assert.Contains(t, ls.documentText("pages/pricing.md"), "Team: 12 EUR")

	// A second visit.
	resp, err = chromedp.Run(browser.step(), chromedp.NavigateResponse(link))
	require.NoError(t, err)
	require.EqualValues(t, 409, resp.Status)
	text = browser.text(t, "main")
	assert.Contains(t, text, "Already decided")
	assert.Contains(t, text, "already approved by "+linkApprover)
	assert.Equal(t, done.Version, ls.alice.run(run.ID).Version, "the second visit changed nothing")
}

// TestApprovalLinkInBrowserDenyWithReason: the approver types a reason and
// clicks Deny; the reason is stored with the decision and reaches the model
// as the denied call's result, and the write does not happen.
func TestApprovalLinkInBrowserDenyWithReason(t *testing.T) {
	browser := newBrowser(t)
	demo, err := scripted.Parse(demoScript)
	require.NoError(t, err)
	model := &recordingModel{model: demo}
	ls := startModelServer(t, model)
	run, link := ls.suspend(nil)
	before := ls.documentText("pages/pricing.md")

	const reason = "Not during the price freeze (OPS-12) — ask finance first."
	require.NoError(t, chromedp.Do(browser.step(),
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#message"), chromedp.NodeVisible),
		chromedp.SendKeys(chromedp.CSS("#message"), reason, chromedp.NodeVisible),
	))
	resp, err := chromedp.RunResponse(browser.step(), chromedp.Click(chromedp.CSS("button.deny"), chromedp.NodeVisible))
	require.NoError(t, err)
	require.EqualValues(t, 200, resp.Status)
	text := browser.text(t, "main")
	assert.Contains(t, text, "Denied. The agent is told its calls were not allowed.")
	assert.Contains(t, text, "Your reason: "+reason)

	done := ls.alice.waitStatus(run.ID, "COMPLETED")
	require.NotNil(t, done.Decision)
	assert.Equal(t, "deny", done.Decision.Decision.Action)
	assert.Equal(t, reason, done.Decision.Decision.Message, "the typed reason, as stored")
	assert.Equal(t, linkApprover, done.Decision.By)
	assert.Equal(t, 0, toolExecutions(t, ls.alice.events(run.ID), "write_document"))
	assert.Equal(t, before, ls.documentText("pages/pricing.md"), "the denied write did not happen")
	results := model.toolResults("toolu_demo_write")
	require.NotEmpty(t, results, "the model got a result for the denied call")
	assert.Contains(t, results[len(results)-1].Content, reason, "the model receives the reason")

	resp, err = chromedp.Run(browser.step(), chromedp.NavigateResponse(link))
	require.NoError(t, err)
	require.EqualValues(t, 409, resp.Status)
	assert.Contains(t, browser.text(t, "main"), "already denied by "+linkApprover)
}

// browser is one headless Chromium with one tab.
type browser struct {
	ctx context.Context
	t   *testing.T
}

// newBrowser starts headless Chromium with a fresh profile. Without
// Chromium the test fails when CI is set and is skipped otherwise.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		const msg = "headless Chromium is needed for the browser tests: apt-get install -y chromium (Debian package), or put chromium on the PATH"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var out syncBuffer
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// /dev/shm is 64 MB in a default container; Chromium crashes when
		// it fills up.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(900, 1200),
		chromedp.CombinedOutput(&out),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if t.Failed() {
			t.Logf("chromium output:\n%s", out.String())
		}
	})
	// The first action starts the browser; it gets no timeout, which would
	// end the browser with it, so a start that hangs is bounded here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		require.NoError(t, err, "start chromium %s", path)
	case <-time.After(browserWait):
		t.Fatalf("chromium %s did not start within %s", path, browserWait)
	}
	return &browser{ctx: ctx, t: t}
}

// step returns a context for one browser step, bounded by browserWait.
func (b *browser) step() context.Context {
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	b.t.Cleanup(cancel)
	return ctx
}

// text returns the rendered text of the element sel.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.step(), chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	require.NoError(t, err)
	return s
}

// screenshot captures the viewport into t.TempDir()/name and checks it is
// a PNG of a real page: decodable, of the window's size and not a blank
// image's few bytes. With LINKTEST_SCREENSHOT_DIR set it is copied there to
// look at.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	shot, err := chromedp.Run(b.step(), chromedp.CaptureScreenshot())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, shot, 0o600))
	require.True(t, bytes.HasPrefix(shot, []byte("\x89PNG\r\n\x1a\n")), "%s is a PNG", name)
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	size := img.Bounds().Size()
	require.Greater(t, size.X, 300, "screenshot width")
	require.Greater(t, size.Y, 300, "screenshot height")
	require.Greater(t, len(shot), 20<<10, "a rendered page compresses to more than a blank one")
	// More than two colours: text and buttons, not a blank page.
	colours := map[[4]uint32]bool{}
	for y := 0; y < size.Y && len(colours) < 16; y += 7 {
		for x := 0; x < size.X && len(colours) < 16; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	require.GreaterOrEqual(t, len(colours), 16, "the screenshot has the page's colours")
	if dir := os.Getenv("LINKTEST_SCREENSHOT_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), shot, 0o644))
	}
	t.Logf("screenshot %s: %dx%d, %d bytes", path, size.X, size.Y, len(shot))
}

// chromiumPath finds Chromium (or Chrome): CHROMIUM_PATH, then the PATH.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil && !strings.Contains(p, "snap") {
			return p
		}
	}
	return ""
}
