package soak

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// Config configures a soak.
type Config struct {
	// Bin is the agentgate binary to serve with.
	Bin string
	// Dir is a fresh folder: the server's --dir is Dir/serve; the server
	// logs (serve-NNN.log, one per process), runs.json and report.json go
	// beside it.
	Dir string
	// Duration is how long clients start runs and kills happen.
	Duration time.Duration
	// Kills is how many SIGKILLs land in Duration.
	Kills int
	// Clients is how many clients drive runs concurrently.
	Clients int
	// Seed makes the mix of modes and the kill schedule reproducible (the
	// timing of a loaded machine is not).
	Seed uint64
	// Sweep is serve --sweep-every (default 1 s).
	Sweep time.Duration
	// Settle is the longest wait, after the last kill and the end of
	// Duration, for every run to end or wait for a human (default: the
	// lease, five sweeps and 30 s).
	Settle time.Duration
	// Store is serve --store: "embedded" (default) or "aws" (Env names the
	// table, bucket and endpoint).
	Store string
	// Env is added to the server's environment.
	Env []string
	// RawEmulator, with Store "aws", lets the server's DynamoDB requests
	// reach the emulator concurrently instead of one at a time (see
	// serializer: on moto that breaks transactions, not agentgate).
	RawEmulator bool
	// ServeArgs are more serve flags.
	ServeArgs []string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// Result is a finished soak: the report and what it was measured on.
type Result struct {
	Report   Report        `json:"report"`
	Duration time.Duration `json:"duration_ns"`
	Settled  time.Duration `json:"settle_ns"`
	// LoadAvg are /proc/loadavg's 1-minute figures at the start, the
	// largest seen, and at the end.
	LoadStart, LoadMax, LoadEnd float64
	Store                       string `json:"store"`
	Clients                     int    `json:"clients"`
	Seed                        uint64 `json:"seed"`
}

// Run runs a soak.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Sweep <= 0 {
		cfg.Sweep = time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = runs.DefaultLeaseTTL + 5*cfg.Sweep + 30*time.Second
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 8
	}
	if cfg.Store == "" {
		cfg.Store = "embedded"
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	var logMu sync.Mutex
	began := time.Now()
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(logw, "soak %6.1fs: %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	serveDir := filepath.Join(cfg.Dir, "serve")
	if err := os.MkdirAll(serveDir, 0o700); err != nil {
		return nil, err
	}
	rec, err := StartRecorder()
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	script, sources, err := writeFiles(cfg.Dir, rec.URL)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var docs func(string) (string, bool)
	if cfg.Store == "aws" {
		endpoint := awsEndpoint()
		if !cfg.RawEmulator {
			ser, err := startSerializer(endpoint)
			if err != nil {
				return nil, err
			}
			defer ser.Close()
			cfg.Env = append(cfg.Env, "AWS_ENDPOINT_URL="+ser.URL)
		}
		d, err := newAWSDocs(ctx, endpoint, os.Getenv("AGENTGATE_BUCKET"))
		if err != nil {
			return nil, err
		}
		if err := d.seed(ctx); err != nil {
			return nil, err
		}
		docs = d.read
	}
	aliceTok, bobTok := randomToken(), randomToken()
	args := []string{"serve", "--addr", addr, "--dir", serveDir, "--sweep-every", cfg.Sweep.String(),
		"--model", "scripted:" + script, "--tools", sources,
		"--token", Initiator + "=" + aliceTok, "--token", Approver + "=" + bobTok, "--store", cfg.Store}
	srv := &server{bin: cfg.Bin, args: append(args, cfg.ServeArgs...), env: cfg.Env, dir: cfg.Dir, url: "http://" + addr, readyToken: bobTok}
	if err := srv.start(); err != nil {
		return nil, err
	}
	if err := srv.waitReady(ctx, 2*time.Minute); err != nil {
		srv.kill()
		return nil, fmt.Errorf("first start: %w", err)
	}
	res := &Result{Store: cfg.Store, Clients: cfg.Clients, Seed: cfg.Seed, LoadStart: loadAvg()}
	res.LoadMax = res.LoadStart
	logf("serving on %s (store %s, sweep %s); %d clients, %d kills in %s, seed %d, load %.1f",
		srv.url, cfg.Store, cfg.Sweep, cfg.Clients, cfg.Kills, cfg.Duration, cfg.Seed, res.LoadStart)

	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed+1)) //nolint:gosec // a reproducible schedule
	k := newKiller(srv, rec, rng, logf)
	d, err := newDriver(srv.url, aliceTok, bobTok, k)
	if err != nil {
		srv.kill()
		return nil, err
	}

	start := time.Now()
	drive, stopDrive := context.WithTimeout(ctx, cfg.Duration)
	defer stopDrive()
	settle, stopSettle := context.WithCancel(ctx)
	defer stopSettle()

	loadDone := make(chan struct{})
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		for {
			select {
			case <-loadDone:
				return
			case <-time.After(5 * time.Second):
				res.LoadMax = max(res.LoadMax, loadAvg())
			}
		}
	}()

	killsDone := make(chan struct{})
	at, modes := planKills(rng, cfg.Duration, cfg.Kills)
	go func() {
		defer close(killsDone)
		k.run(drive, start, at, modes)
	}()
	var clients sync.WaitGroup
	for i := range cfg.Clients {
		clients.Add(1)
		go func() {
			defer clients.Done()
			d.client(drive, settle, cfg.Seed*1000+uint64(i)) //nolint:gosec // i is small
		}()
	}
	clientsDone := make(chan struct{})
	parkedDone := make(chan struct{})
	go func() {
		defer close(parkedDone)
		d.parkedLoop(settle, clientsDone)
	}()
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
wait:
	for {
		select {
		case <-drive.Done():
			break wait
		case <-progress.C:
			d.mu.Lock()
			n, parked := len(d.runs), len(d.parked)
			d.mu.Unlock()
			logf("%d runs accepted, %d parked, %d kills", n, parked, len(k.Kills()))
		}
	}
	<-killsDone
	if err := k.err(); err != nil {
		stopSettle()
		clients.Wait()
		close(clientsDone)
		<-parkedDone
		srv.kill()
		return nil, err
	}
	driveEnd := time.Now()
	last := driveEnd
	if ks := k.Kills(); len(ks) > 0 && ks[len(ks)-1].At.After(last) {
		last = ks[len(ks)-1].At
	}
	d.mu.Lock()
	accepted := len(d.runs)
	d.mu.Unlock()
	logf("drive over: %d runs accepted, %d kills; settling until every run ends or waits, or none moved for %s",
		accepted, len(k.Kills()), cfg.Settle)
	// Settling ends when no run changed status for cfg.Settle after the
	// last kill (a run still moving is not stuck, however slow the
	// machine), and at the latest after four times that.
	go func() {
		hardStop := last.Add(4 * cfg.Settle)
		for settle.Err() == nil {
			moved := time.Unix(0, d.progress.Load())
			if now := time.Now(); now.After(maxTime(last, moved).Add(cfg.Settle)) || now.After(hardStop) {
				stopSettle()
				return
			}
			sleepCtx(settle, time.Second)
		}
	}()
	clients.Wait()
	close(clientsDone)
	<-parkedDone
	res.Duration = driveEnd.Sub(start)
	res.Settled = time.Since(driveEnd)
	logf("settled after %.0fs; reading every run", res.Settled.Seconds())

	recs := d.collect(ctx, 8)
	obs := Observed{Runs: recs, StartUnknown: d.startUnknown, Executions: rec.Executions(), Kills: k.Kills()}
	d.http.mu.Lock()
	obs.HTTP = HTTPSummary{Requests: d.http.Requests, Conn: d.http.Conn, ByOutcome: d.http.ByOutcome, ServerErrors: d.http.ServerErrors}
	d.http.mu.Unlock()
	srv.stop(15 * time.Second)
	obs.Document = docs
	if cfg.Store == "embedded" {
		census, err := readCensus(filepath.Join(serveDir, "agentgate.db"))
		if err != nil {
			logf("census: %v", err)
		} else {
			obs.Census = census
		}
		content := filepath.Join(serveDir, "content")
		obs.Document = func(p string) (string, bool) {
			b, err := os.ReadFile(filepath.Join(content, filepath.FromSlash(p)))
			return string(b), err == nil
		}
	}
	close(loadDone)
	loadWG.Wait()
	res.LoadEnd = loadAvg()
	res.Report = Analyze(obs)
	if err := writeJSON(filepath.Join(cfg.Dir, "runs.json"), recs); err != nil {
		logf("write runs.json: %v", err)
	}
	if err := writeJSON(filepath.Join(cfg.Dir, "executions.json"), obs.Executions); err != nil {
		logf("write executions.json: %v", err)
	}
	if err := writeJSON(filepath.Join(cfg.Dir, "report.json"), res); err != nil {
		logf("write report.json: %v", err)
	}
	return res, nil
}

// readCensus lists every run of the embedded store and whether the due
// index holds it.
func readCensus(path string) ([]CensusRun, error) {
	db, err := embedded.Open(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []CensusRun
	err = db.EachRun(func(r *runs.Run, indexed bool) error {
		out = append(out, CensusRun{ID: r.ID, Status: string(r.Status), Reason: string(r.Reason), Indexed: indexed})
		return nil
	})
	return out, err
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// loadAvg is the 1-minute load average (0 where /proc/loadavg is missing).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var v float64
	_, _ = fmt.Sscanf(strings.Fields(string(b))[0], "%g", &v)
	return v
}
