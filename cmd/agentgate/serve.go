package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/dispatch"
	"github.com/agentgate/agentgate/internal/gateway"
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

func init() {
	commands["serve"] = command{
		summary: "serve the REST API and approval pages locally (embedded store, in-process workers, purge on a timer)",
		run:     runServe,
	}
}

// serveOptions configure a local server.
type serveOptions struct {
	addr string
	// listener, when set, is where the server accepts (addr is then
	// ignored); the server owns and closes it. A caller that must know
	// the address before the server starts (tests that hand it to the
	// Lambda bootstraps) binds it first instead of picking a port that
	// another process could take in between.
	listener net.Listener
	// publicURL is the base of the approval links ("": the listen
	// address, with localhost for an unspecified host).
	publicURL string
	dir       string
	model     string
	tokens    map[string]string // bearer token -> principal
	// sweepEvery is the sweep's period (serve --sweep-every takes 1s to
	// 24h; 0, for tests only: no sweep after the start-up pass).
	sweepEvery time.Duration
	mailOut    io.Writer
	logger     *slog.Logger
	// remote maps function names (startrun, resume, purge) to Runtime
	// Interface Emulator base URLs: the functions run as real bootstrap
	// binaries and the server only adapts HTTP and Lambda invokes.
	remote map[string]string
	// store is "embedded" (default) or "aws".
	store string
	// tools is the tool-sources file of MCP servers (serve --tools).
	tools string
	// webhooks configure webhook delivery (nil: none; see serveWebhooks).
	webhooks *app.Webhooks
	// directory and policy are the directory and policy files (serve
	// --directory, --policy).
	directory, policy string
	// segmentBudget, when positive, is how long a worker's segment may run
	// before the run is checkpointed and continued by a new job.
	segmentBudget time.Duration
	// retention is how long settled runs are kept on the embedded store
	// (0: AGENTGATE_RETENTION, else runs.DefaultRetention).
	retention time.Duration
	// quorumCheckEvery is the quorum checks' interval (serve
	// --quorum-check-every, else AGENTGATE_QUORUM_CHECK_EVERY; 0, for
	// tests: service.DefaultQuorumCheckEvery).
	quorumCheckEvery time.Duration
	// now is the clock of the embedded store, the workers and the sweep
	// (nil: the wall clock; tests only).
	now func() time.Time
}

// localServer is a running local agentgate.
type localServer struct {
	URL string
	// App and Dispatcher are the in-process application (nil in remote mode).
	App        *app.App
	Dispatcher *dispatch.InProcess
	closeStore func() error
	// tools are the MCP servers' tools (nil without --tools).
	tools *mcptool.Catalog
	// Invoke is the Lambda Invoke API of the remote functions (remote mode).
	Invoke *gateway.InvokeAPI
	srv    *http.Server
	done   chan struct{}
	stop   context.CancelFunc
}

func startLocal(ctx context.Context, o serveOptions) (_ *localServer, err error) {
	if o.listener != nil {
		// A listener handed over is closed on every failed start.
		defer func() {
			if err != nil {
				_ = o.listener.Close()
			}
		}()
	}
	// The files (--directory, --policy, --tools, a scripted --model) are
	// read before the port is taken: a broken one is told as such, not
	// hidden behind a busy port. The tools' servers are connected to
	// after.
	var gov app.Governance
	var model loop.Model
	var toolFile *mcptool.File
	if len(o.remote) == 0 {
		if gov, err = app.LoadGovernance(o.directory, o.policy); err != nil {
			return nil, err
		}
		if toolFile, err = readServeTools(o.tools, o.logger, o.now); err != nil {
			return nil, err
		}
		if model, err = serveModel(ctx, o.model, o.logger); err != nil {
			return nil, err
		}
	}
	ln := o.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", o.addr, err)
		}
	}
	base := "http://" + ln.Addr().String()
	if len(o.remote) > 0 {
		if o.publicURL != "" {
			ln.Close()
			return nil, errors.New("--public-url does not apply with --remote: the Lambda bootstraps make the links (AGENTGATE_PUBLIC_BASE_URL in their environment)")
		}
		return startRemote(ctx, ln, base, o)
	}
	links, err := linkBase(o.publicURL, ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}
	tools, err := openServeTools(ctx, o.tools, toolFile, o.logger, o.now)
	if err != nil {
		ln.Close()
		return nil, err
	}
	a, disp, closeStore, err := openApp(ctx, o, links, model, tools, gov)
	if err != nil {
		ln.Close()
		_ = tools.Close()
		return nil, err
	}
	handler := a.API.Handle
	gw := &gateway.Gateway{StartRun: handler, Resume: handler, Tokens: o.tokens, Logger: o.logger}
	srv := newHTTPServer(gw)
	ctx, stop := context.WithCancel(ctx)
	s := &localServer{URL: base, App: a, Dispatcher: disp, closeStore: closeStore, tools: tools, srv: srv, done: make(chan struct{}), stop: stop}
	// A transition that schedules a webhook delivery names its run here,
	// and so does the sweep for a run whose retries are due: delivery
	// goroutines make the attempts, the sweep never waits for a receiver.
	var deliveriesDone sync.WaitGroup
	if a.Sweeper.Webhooks != nil {
		q := newDeliveryQueue(deliveryQueueSize)
		a.Sweeper.Store.NotifyScheduled(q.add)
		a.Sweeper.QueueDeliveries = q.add
		deliveriesDone.Go(func() { makeDeliveries(ctx, a.Sweeper, q) })
	}
	// The servers that set list_every_seconds are listed on their own,
	// off the request path; Close waits for a listing in flight (at most
	// its server's connect timeout) before it ends the sessions.
	var relisting sync.WaitGroup
	if tools != nil {
		relisting.Go(func() { tools.KeepListed(ctx) })
	}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		defer close(s.done)
		defer relisting.Wait()
		defer deliveriesDone.Wait()
		// Due work is handled at start-up, not after the first tick. On the
		// embedded store this process is the only dispatcher, so jobs a
		// previous process dispatched died with it: Recover dispatches
		// waiting runs at once instead of after their grace period.
		if o.store != "aws" {
			_, _ = a.Sweeper.Recover(ctx)
		} else {
			_, _ = a.Sweeper.Sweep(ctx)
		}
		every(ctx, o.sweepEvery, func() { _, _ = a.Sweeper.Sweep(ctx) })
	}()
	return s, nil
}

// deliveryQueueSize bounds the runs waiting for their webhook attempts on
// the local server; those named past it wait for the next sweep.
const deliveryQueueSize = 1024

// deliveryQueue is the local server's queue of runs whose due webhook
// attempts are to be made: named by the writes that schedule deliveries
// (first attempts) and by the sweep (retries). A run is queued once until
// a delivery goroutine takes it up; a run named when the queue is full is
// dropped (the next sweep names it again).
type deliveryQueue struct {
	runs   chan string
	mu     sync.Mutex
	queued map[string]bool
}

func newDeliveryQueue(size int) *deliveryQueue {
	return &deliveryQueue{runs: make(chan string, size), queued: map[string]bool{}}
}

// add queues run id unless it is queued already or the queue is full; it
// never blocks.
func (q *deliveryQueue) add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[id] {
		return
	}
	select {
	case q.runs <- id:
		q.queued[id] = true
	default:
	}
}

// taken notes that a delivery goroutine took run id up: naming it again
// queues it again.
func (q *deliveryQueue) taken(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.queued, id)
}

// linkBase is the base URL of the approval links: public when given (an
// absolute http(s) URL without query or fragment), else the listen
// address, where an unspecified host (0.0.0.0, ::), which no browser can
// open, becomes localhost.
func linkBase(public string, addr net.Addr) (string, error) {
	if public != "" {
		u, err := url.Parse(public)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
			return "", fmt.Errorf("--public-url %q is not an http(s) URL without user, query or fragment", public)
		}
		return strings.TrimRight(public, "/"), nil
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// openApp builds the in-process application: on the embedded store by
// default, or on DynamoDB+S3 (names and endpoint from the environment:
// AGENTGATE_TABLE, AGENTGATE_BUCKET, AWS_ENDPOINT_URL, ...) with o.store "aws".
func openApp(ctx context.Context, o serveOptions, base string, model loop.Model, tools *mcptool.Catalog, gov app.Governance) (*app.App, *dispatch.InProcess, func() error, error) {
	outbox := filepath.Join(o.dir, "outbox")
	if o.store != "aws" {
		retention := o.retention
		if retention <= 0 {
			r, err := config.RetentionFrom(os.Getenv)
			if err != nil {
				return nil, nil, nil, err
			}
			retention = r
		}
		local, err := app.OpenLocal(app.LocalOptions{Dir: o.dir, Seed: demoSeed(o.model), Model: model, ToolSources: tools, BaseURL: base, MailOut: o.mailOut, Logger: o.logger, Webhooks: o.webhooks, Governance: gov, SegmentBudget: o.segmentBudget, Retention: retention, QuorumCheckEvery: o.quorumCheckEvery, Now: o.now})
		if errors.Is(err, embedded.ErrInUse) {
			return nil, nil, nil, fmt.Errorf("%w: is another agentgate (serve or demo) running on --dir %s? Stop it, or give another --dir", err, o.dir)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		return local.App, local.Dispatcher, local.Close, nil
	}
	cfg, err := awsServeConfig(o, base, os.Getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	awsCfg, err := loadAWSConfig(ctx, o.logger)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if err := checkAWSStore(ctx, awsCfg, cfg.Table, cfg.Bucket, o.logger); err != nil {
		return nil, nil, nil, err
	}
	if err := os.MkdirAll(outbox, 0o700); err != nil {
		return nil, nil, nil, err
	}
	disp := &dispatch.InProcess{Logger: o.logger}
	a, err := app.NewAWS(app.AWSOptions{Config: cfg, AWS: awsCfg, Model: model, ToolSources: tools, Routes: routes.All(), MaxWait: runs.MaxWait,
		Owner: "local", Logger: o.logger, Dispatch: disp,
		Mailer: approval.NewOutboxMailer(outbox, "agentgate@localhost", o.mailOut), Webhooks: o.webhooks, Governance: &gov, SegmentBudget: o.segmentBudget})
	if err != nil {
		return nil, nil, nil, err
	}
	disp.Worker = a.Worker
	return a, disp, func() error { return nil }, nil
}

// awsServeConfig is the configuration of serve --store aws: the
// environment's (getenv), under the flags. A variable a flag stands for
// is not read at all, as on the embedded store, so a malformed one does
// not stop a start-up whose flag says otherwise.
func awsServeConfig(o serveOptions, base string, getenv func(string) string) (config.Config, error) {
	overridden := map[string]bool{
		config.EnvPublicBaseURL:      o.publicURL != "",
		config.EnvRetention:          o.retention > 0,
		config.EnvQuorumCheckEvery:   o.quorumCheckEvery > 0,
		config.EnvWebhookConcurrency: o.webhooks != nil, // serveWebhooks read the flag, else the variable
	}
	cfg, err := config.Load(func(name string) string {
		if overridden[name] {
			return ""
		}
		return getenv(name)
	}, config.EnvTable, config.EnvBucket)
	if err != nil {
		return config.Config{}, err
	}
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = base // --public-url over AGENTGATE_PUBLIC_BASE_URL
	}
	if o.retention > 0 {
		cfg.Retention = o.retention // --retention over AGENTGATE_RETENTION
	}
	if o.quorumCheckEvery > 0 {
		cfg.QuorumCheckEvery = o.quorumCheckEvery // --quorum-check-every over AGENTGATE_QUORUM_CHECK_EVERY
	}
	if o.webhooks != nil {
		cfg.DeliveryConcurrency = o.webhooks.DeliveryConcurrency
	}
	return cfg, nil
}

// startRemote serves the gateway in front of functions running under the
// Runtime Interface Emulator, plus the Lambda Invoke API they dispatch to.
func startRemote(ctx context.Context, ln net.Listener, base string, o serveOptions) (*localServer, error) {
	fns := map[string]*gateway.RemoteFunction{}
	for name, url := range o.remote {
		fns[name] = &gateway.RemoteFunction{BaseURL: strings.TrimRight(url, "/")}
	}
	for _, need := range []string{"startrun", "resume"} {
		if fns[need] == nil {
			ln.Close()
			return nil, fmt.Errorf("remote mode needs --remote %s=<url>", need)
		}
	}
	invoke := &gateway.InvokeAPI{Functions: fns, Logger: o.logger}
	gw := &gateway.Gateway{StartRun: fns["startrun"].Handler(), Resume: fns["resume"].Handler(), Tokens: o.tokens, Logger: o.logger}
	mux := http.NewServeMux()
	mux.Handle("/2015-03-31/", invoke)
	mux.Handle("/", gw)
	srv := newHTTPServer(mux)
	ctx, stop := context.WithCancel(ctx)
	s := &localServer{URL: base, Invoke: invoke, srv: srv, done: make(chan struct{}), stop: stop}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		defer close(s.done)
		purge := fns["purge"]
		if purge == nil {
			<-ctx.Done()
			return
		}
		every(ctx, o.sweepEvery, func() {
			if _, err := purge.Invoke(ctx, scheduledEvent()); err != nil {
				o.logger.Error("purge invoke failed", "err", err)
			}
		})
	}()
	return s, nil
}

// scheduledEvent is the EventBridge scheduled event the purge rule sends.
func scheduledEvent() []byte {
	return []byte(`{"version":"0","id":"` + gateway.NewToken() + `","detail-type":"Scheduled Event","source":"aws.events",` +
		`"account":"000000000000","time":"` + time.Now().UTC().Format(time.RFC3339) + `","region":"us-east-1",` +
		`"resources":["arn:aws:events:us-east-1:000000000000:rule/agentgate-purge"],"detail":{}}`)
}

// Close stops serving, waits for running jobs and closes the store.
func (s *localServer) Close() error {
	s.stop()
	<-s.done
	if s.App != nil {
		// Requests held by ?wait= answer now, with the run as it is,
		// rather than holding Shutdown for up to 20 s.
		s.App.Store.StopWaits()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A client (a browser, say) kept a connection busy past the grace
		// period: close the remaining connections.
		err = s.srv.Close()
	}
	if s.Invoke != nil {
		s.Invoke.Wait()
	}
	if s.App == nil {
		return err
	}
	s.Dispatcher.Wait()
	return errors.Join(err, s.closeStore(), s.tools.Close())
}

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	public := fs.String("public-url", "", "base URL approvers open the approval links at, e.g. https://agentgate.example.com (default: http://<listen address>, localhost for 0.0.0.0 or [::])")
	dir := fs.String("dir", ".agentgate", "folder for the embedded store, documents (content/) and mail (outbox/); with --store aws, mail only (documents are in the bucket)")
	model := fs.String("model", "", "model spec as the Lambdas take it: scripted:<file>, bedrock:<id>, openai:<model> (AGENTGATE_OPENAI_BASE_URL for compatible servers), anthropic:<model> (default: the built-in demo script)")
	tools := fs.String("tools", "", "tool-sources file: MCP servers whose tools the model may call, behind the approval gate (see README)")
	var tokens tokenFlag
	// A bad --token or --token-file is kept here and reported after the
	// parse, not returned from the flag's Set: the flag package would
	// quote the value, the secret, in its error ("invalid value
	// \"alice=...\" for flag -token") and print every flag after it.
	var tokensErr error
	fs.Func("token", "bearer token as principal=token (repeatable; visible to other local users in the process list: prefer --token-file); default: one generated for principal 'local-user'", func(v string) error {
		if err := tokens.Set(v); err != nil && tokensErr == nil {
			tokensErr = tokenArgError(v, err)
		}
		return nil
	})
	var secretFiles []string // files of tokens and secrets, whose mode is checked
	fs.Func("token-file", "file of bearer tokens, one principal=token per line (spaces around = are dropped; blank lines and lines starting with # are skipped; repeatable; keep it mode 0600)", func(path string) error {
		secretFiles = append(secretFiles, path)
		if err := tokens.readFile(path); err != nil && tokensErr == nil {
			tokensErr = fmt.Errorf("--token-file: %w", err) // readFile names the path and line, never a token
		}
		return nil
	})
	sweep := fs.Duration("sweep-every", defaultSweepEvery, "how often the purge sweep runs (expiry, reminders, webhook retries, take-over of lost workers, retention), "+sweepEveryRange)
	retention := fs.Duration("retention", 0, "how long settled runs are kept before the sweep purges them (default: $"+config.EnvRetention+", else 720h)")
	var quorumEvery time.Duration
	fs.Func("quorum-check-every", "how often a waiting run's quorum is checked again against the directory (a call is found lost by two checks this far apart), "+quorumCheckEveryRange+" (default: $"+config.EnvQuorumCheckEvery+", else 1h)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < service.MinQuorumCheckEvery || d > service.MaxQuorumCheckEvery {
			return fmt.Errorf("%q: want a duration from %s", v, quorumCheckEveryRange)
		}
		quorumEvery = d
		return nil
	})
	segment := fs.Duration("segment-budget", 0, "how long a worker works on a run before it checkpoints it and continues it in a new job (0: no limit; a Lambda stops before its timeout)")
	store := fs.String("store", "embedded", "embedded (bbolt file in --dir) or aws (DynamoDB+S3 named by AGENTGATE_TABLE and AGENTGATE_BUCKET, endpoint from AWS_ENDPOINT_URL)")
	whFile := fs.String("webhook-secret-file", "", "enable webhooks, signing with the whsec_ secrets in this file (created with a new secret when missing)")
	whSecret := fs.String("webhook-secret", "", "enable webhooks, signing with this whsec_ secret (visible to other local users in the process list; prefer --webhook-secret-file)")
	whHTTP := fs.Bool("webhook-allow-http", false, "accept plain-http webhook URLs (local tests only)")
	whAllow := fs.String("webhook-allow", "", "internal address prefixes webhooks may go to, comma-separated (e.g. 127.0.0.1,::1 for a receiver on this machine)")
	whConcurrency := 0
	fs.Func("webhook-concurrency", fmt.Sprintf("how many runs' webhook deliveries are made at the same time, 1 to %d (default: $%s, else %d)", webhook.MaxConcurrency, config.EnvWebhookConcurrency, service.DefaultDeliveryConcurrency), func(v string) (err error) {
		whConcurrency, err = webhook.ParseConcurrency(v)
		return err
	})
	directory := fs.String("directory", os.Getenv(config.EnvDirectory), "directory file: persons, their aliases, groups and service accounts (see README; default $"+config.EnvDirectory+")")
	policyFile := fs.String("policy", os.Getenv(config.EnvPolicy), "policy file: rules per tool with CEL conditions (see README; default $"+config.EnvPolicy+")")
	var remote remoteFlag
	fs.Var(&remote, "remote", "run against Lambda bootstraps under the Runtime Interface Emulator: name=url for startrun, resume and purge (repeatable)")
	if err := parseFlags(fs, args, false, stdout); err != nil {
		return err
	}
	if tokensErr != nil {
		return &usageError{err: tokensErr}
	}
	if *store != "embedded" && *store != "aws" {
		return usagef("--store %q: want embedded or aws", *store)
	}
	if *sweep < minSweepEvery || *sweep > maxSweepEvery {
		return usagef("--sweep-every %s: want a duration from %s", *sweep, sweepEveryRange)
	}
	if quorumEvery != 0 && len(remote) > 0 {
		return usagef("--quorum-check-every does not apply with --remote: the Lambda bootstraps check by their own %s", config.EnvQuorumCheckEvery)
	}
	if quorumEvery == 0 && len(remote) == 0 {
		// Not given: the environment's, as the functions read it (with
		// --remote the functions read their own).
		d, err := config.QuorumCheckEveryFrom(os.Getenv)
		if err != nil {
			return usagef("%v", err)
		}
		quorumEvery = d
	}
	retentionGiven := false
	fs.Visit(func(f *flag.Flag) { retentionGiven = retentionGiven || f.Name == "retention" })
	if retentionGiven && (*retention < time.Second || *retention > 10*365*24*time.Hour) {
		return usagef("--retention %s: want a duration from 1s to 87600h", *retention)
	}
	generated := ""
	if len(tokens) == 0 {
		generated = gateway.NewToken()
		tokens = tokenFlag{generated: "local-user"}
	}
	hooks, err := serveWebhooks(*whFile, *whSecret, *whHTTP, *whAllow, whConcurrency, os.Getenv, stdout)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if *whFile != "" {
		secretFiles = append(secretFiles, *whFile)
	}
	warnReadableSecretFiles(logger, secretFiles)
	warnOneCallerTwoSpellings(logger, tokens)
	s, err := startLocal(ctx, serveOptions{addr: *addr, publicURL: *public, dir: *dir, model: *model, tokens: tokens, sweepEvery: *sweep, mailOut: stdout, logger: logger, remote: remote, store: *store, tools: *tools, webhooks: hooks, directory: *directory, policy: *policyFile, segmentBudget: *segment, retention: *retention, quorumCheckEvery: quorumEvery})
	if err != nil {
		return err
	}
	if generated != "" {
		// Only once the server is up: a start that fails hands out no token.
		fmt.Fprintf(stdout, "bearer token for local-user: %s\n", generated)
	}
	if s.tools != nil {
		fmt.Fprint(stdout, s.tools.Summary())
	}
	where := "embedded store in " + *dir
	if *store == "aws" {
		bucket := os.Getenv(config.EnvBucket)
		where = fmt.Sprintf("DynamoDB table %s and S3 bucket %s; documents in s3://%s/content/, outbox in %s", os.Getenv(config.EnvTable), bucket, bucket, filepath.Join(*dir, "outbox"))
	}
	fmt.Fprintf(stdout, "agentgate serving on %s (%s)\n", s.URL, where)
	<-ctx.Done()
	return s.Close()
}

// The default and range of serve --sweep-every: a sweep takes every run's
// time-based step (expiry, reminders, webhook retries, take-over of a
// lost worker, retention), so it cannot be turned off, and a period below
// a second would only run it in a loop.
const (
	defaultSweepEvery = 30 * time.Second
	minSweepEvery     = time.Second
	maxSweepEvery     = 24 * time.Hour
	sweepEveryRange   = "1s to 24h" // minSweepEvery to maxSweepEvery, as README says it
)

// quorumCheckEveryRange is service.MinQuorumCheckEvery to
// service.MaxQuorumCheckEvery, as README says it.
const quorumCheckEveryRange = "1s to 24h"

// tokenFlag collects principal=token pairs into token -> principal.
type tokenFlag map[string]string

func (t *tokenFlag) String() string { return fmt.Sprintf("%d token(s)", len(*t)) }

// Set adds one principal=token pair (of --token or a line of
// --token-file). Spaces around either side are dropped: a token that
// began with one could never be sent (HTTP clients trim header values), so
// it would be accepted here and never authenticate.
func (t *tokenFlag) Set(v string) error {
	principal, token, ok := strings.Cut(v, "=")
	principal, token = strings.TrimSpace(principal), strings.TrimSpace(token)
	switch {
	case !ok || principal == "":
		return errors.New("want principal=token, with a principal before the =")
	case strings.ContainsFunc(token, unicode.IsSpace):
		return errors.New("the token has a space inside: no HTTP client sends it as one token")
	case len(token) < 16:
		return errors.New("token shorter than 16 characters")
	}
	if *t == nil {
		*t = tokenFlag{}
	}
	if other, dup := (*t)[token]; dup && other != principal {
		return fmt.Errorf("one token is given for two principals (%s and %s)", other, principal)
	}
	(*t)[token] = principal
	return nil
}

// tokenArgError is err, of the --token value v, named by v's principal
// only: v holds the secret, which no error may show. A value without an
// = has no principal to name (it may be the bare token).
func tokenArgError(v string, err error) error {
	principal, _, ok := strings.Cut(v, "=")
	if principal = strings.TrimSpace(principal); !ok || principal == "" {
		return fmt.Errorf("--token: %w", err)
	}
	return fmt.Errorf("--token for %q: %w", principal, err)
}

// readFile adds the principal=token lines of the file at path; an error
// names the line, never the token.
func (t *tokenFlag) readFile(path string) error {
	b, err := os.ReadFile(path) //nolint:gosec // the operator names the file
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := t.Set(line); err != nil {
			return fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
	}
	return nil
}

// warnOneCallerTwoSpellings logs a warning for each caller whose tokens
// name it in more than one spelling (alice=T1 and ALICE=T2, or two
// spellings of one e-mail address): principals compare canonically, so
// those tokens are one caller, who sees the same runs and shares the same
// idempotency keys. Tokens for one spelling (a rotation) are not warned
// about; a principal that does not parse is left to the requests.
func warnOneCallerTwoSpellings(logger *slog.Logger, tokens tokenFlag) {
	spellings := map[string][]string{}
	for _, principal := range tokens {
		p, err := identity.Parse(principal)
		if err != nil {
			continue
		}
		if !slices.Contains(spellings[p.Key()], principal) {
			spellings[p.Key()] = append(spellings[p.Key()], principal)
		}
	}
	for _, names := range spellings {
		if len(names) > 1 {
			slices.Sort(names)
			logger.Warn("tokens name one caller in more than one spelling: principals compare canonically (local names and e-mail addresses ignore case, an e-mail address its +tag), so these tokens are one caller, with the same runs and idempotency keys",
				"principals", names)
		}
	}
}

// warnReadableSecretFiles logs a warning for each file of tokens or
// secrets that other local users may read or change (a group or other
// permission bit set), as ssh does for a private key: the README asks for
// mode 0600, and --token is warned against for the same exposure. Not on
// Windows, whose permissions the mode does not show.
func warnReadableSecretFiles(logger *slog.Logger, paths []string) {
	if runtime.GOOS == "windows" {
		return
	}
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		logger.Warn("secret file is open to other local users: they can read (or change) the tokens or secrets in it; chmod 600 it",
			"file", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
}

// remoteFlag collects name=url pairs of remote functions.
type remoteFlag map[string]string

func (r *remoteFlag) String() string { return fmt.Sprintf("%d function(s)", len(*r)) }

func (r *remoteFlag) Set(v string) error {
	name, url, ok := strings.Cut(v, "=")
	if !ok || (name != "startrun" && name != "resume" && name != "purge") || !strings.HasPrefix(url, "http") {
		return fmt.Errorf("want startrun|resume|purge=http://host:port")
	}
	if *r == nil {
		*r = remoteFlag{}
	}
	(*r)[name] = url
	return nil
}

// serveWebhooks builds the local server's webhook configuration from its
// flags: nil (webhooks off) unless a secret file or value is given. The
// delivery goroutines make the attempts of concurrency runs at the same
// time (--webhook-concurrency; 0: AGENTGATE_WEBHOOK_CONCURRENCY read with
// getenv, else service.DefaultDeliveryConcurrency).
func serveWebhooks(file, secret string, allowHTTP bool, allow string, concurrency int, getenv func(string) string, stdout io.Writer) (*app.Webhooks, error) {
	prefixes, err := webhook.ParseAllowList(allow)
	if err != nil {
		return nil, fmt.Errorf("--webhook-allow: %w", err)
	}
	if concurrency == 0 {
		// Read even without webhooks: a malformed value is refused
		// whatever else is given, as the functions refuse it.
		if concurrency, err = config.DeliveryConcurrencyFrom(getenv); err != nil {
			return nil, err
		}
	} else if file == "" && secret == "" {
		return nil, fmt.Errorf("--webhook-concurrency needs --webhook-secret-file or --webhook-secret")
	}
	var signer *webhook.Signer
	switch {
	case file != "" && secret != "":
		return nil, fmt.Errorf("give --webhook-secret-file or --webhook-secret, not both")
	case file != "":
		var created bool
		if signer, created, err = webhook.EnsureSecretFile(file); err != nil {
			return nil, err
		}
		if created {
			fmt.Fprintf(stdout, "webhook signing secret written to %s\n", file)
		}
	case secret != "":
		if signer, err = webhook.NewSigner(secret); err != nil {
			return nil, fmt.Errorf("--webhook-secret: %w", err)
		}
	default:
		if allowHTTP || len(prefixes) > 0 {
			return nil, fmt.Errorf("--webhook-allow-http and --webhook-allow need --webhook-secret-file or --webhook-secret")
		}
		return nil, nil
	}
	return &app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: allowHTTP, Allow: prefixes}, DeliveryConcurrency: concurrency}, nil
}

// Timeouts of the local server: a client gets 10 s for its headers, 60 s
// for the whole request (bodies are at most a few hundred KB), and an idle
// keep-alive connection is closed after 2 minutes.
const (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = 60 * time.Second
	serveIdleTimeout       = 2 * time.Minute
	serveMaxHeaderBytes    = 64 << 10
)

// newHTTPServer returns the local server with header, read and idle
// timeouts; the gateway authenticates before it reads a body.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: serveReadHeaderTimeout,
		ReadTimeout:       serveReadTimeout,
		IdleTimeout:       serveIdleTimeout,
		MaxHeaderBytes:    serveMaxHeaderBytes,
	}
}

// makeDeliveries makes the due webhook attempts of the runs q names
// (sw.DeliverRun: first attempts, and the retries the sweep finds due),
// each run's on a goroutine of its own, for up to sw.DeliveryConcurrency
// runs at the same time (else service.DefaultDeliveryConcurrency): a
// receiver that answers slowly holds up its own run's deliveries, not the
// others' (unless that many are slow at once) nor the sweep, which makes
// no attempt itself. A run another pass has is left to it
// (service.Sweeper.DeliverRun). When ctx ends, no further attempt starts;
// makeDeliveries returns once the attempts under way are made and
// recorded (each within webhook.DefaultTimeout).
func makeDeliveries(ctx context.Context, sw *service.Sweeper, q *deliveryQueue) {
	n := sw.DeliveryConcurrency
	if n <= 0 {
		n = service.DefaultDeliveryConcurrency
	}
	var running sync.WaitGroup
	defer running.Wait()
	slots := make(chan struct{}, n)
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-q.runs:
		}
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		if ctx.Err() != nil {
			// Both cases were ready at stop: select picks at random.
			return
		}
		q.taken(id)
		running.Go(func() {
			defer func() { <-slots }()
			_, _ = sw.DeliverRun(ctx, id)
		})
	}
}

// every calls fn every period until ctx ends, and returns when it does; a
// period of zero or less never calls fn.
func every(ctx context.Context, period time.Duration, fn func()) {
	if period <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// checkAWSStore refuses to start on a table or bucket that does not exist:
// every request that touched it would answer 500. Any other answer (no
// permission to describe them, a network error) is logged and left to the
// requests, which name the cause.
func checkAWSStore(ctx context.Context, awsCfg aws.Config, table, bucket string, logger *slog.Logger) error {
	// An unreachable endpoint must not hold the start up for the SDK's
	// retries: the check gives up and lets the requests say.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	where := "AWS " + awsCfg.Region
	if awsCfg.BaseEndpoint != nil {
		where = *awsCfg.BaseEndpoint
	}
	_, err := dynamodb.NewFromConfig(awsCfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var noTable *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &noTable):
		return fmt.Errorf("table %q (AGENTGATE_TABLE) does not exist on %s: create it and the bucket with `agentgate init`", table, where)
	case err != nil:
		logger.Warn("could not check that the runs table exists", "table", table, "err", err)
	}
	_, err = awswire.NewS3(awsCfg).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	var noBucket *s3types.NotFound
	switch {
	case errors.As(err, &noBucket):
		return fmt.Errorf("bucket %q (AGENTGATE_BUCKET) does not exist on %s: create it and the table with `agentgate init`", bucket, where)
	case err != nil:
		logger.Warn("could not check that the state bucket exists", "bucket", bucket, "err", err)
	}
	return nil
}
