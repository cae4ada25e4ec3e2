package mcptool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgate/agentgate/internal/loop"
)

// Options configure Open.
type Options struct {
	// Secrets reads secret_arn header values (nil: such headers fail).
	Secrets SecretsClient
	// Getenv reads env header values (nil: os.Getenv is not consulted and
	// such headers fail).
	Getenv func(string) string
	// Transport is the HTTP transport under the MCP client (nil:
	// http.DefaultTransport).
	Transport http.RoundTripper
	// ConnectTimeout bounds connecting to and listing one server at
	// start-up, and later (Seek, Relist) for a server whose
	// connect_timeout_seconds is not set (0: DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// RetryInterval is, for a server whose retry_interval_seconds is not
	// set, the least time between two attempts a run brings about to
	// connect to the server while it is absent (start-up counts as one),
	// and between two listings of it for a tool it did not offer (0:
	// DefaultRetryInterval).
	RetryInterval time.Duration
	// Version is announced to servers as the client version.
	Version string
	Logger  *slog.Logger
	// Now returns the current time (nil: time.Now).
	Now func() time.Time
}

// DefaultConnectTimeout bounds the start-up connection and listing of one server.
const DefaultConnectTimeout = 10 * time.Second

// DefaultRetryInterval is the least time between two attempts to reach an
// absent server (or to list a server again for a tool a run names that it
// did not offer).
const DefaultRetryInterval = 30 * time.Second

// Absence is a configured server whose tools are absent, and why.
type Absence struct {
	Server string
	// Prefix is what the server's exposed tool names start with.
	Prefix string
	Reason string
}

// Catalog holds the tools of every reachable configured server. It is a
// loop.ToolSource: a server that was absent at start-up is tried again
// when a run needs its tools (Seek), and tools a server offers in a later
// listing join it; a toolbox made with loop.NewToolboxWithSource follows.
type Catalog struct {
	o       Options
	getenv  func(string) string
	timeout time.Duration
	every   time.Duration
	logger  *slog.Logger
	// rev counts the changes of the catalog's tools and absences.
	rev atomic.Uint64
	mu  sync.Mutex
	// slots hold the file's servers, in file order.
	slots  []*slot
	closed bool
}

var _ loop.ToolSource = (*Catalog)(nil)

// slot is one configured server: its tools, or why they are absent.
type slot struct {
	server Server
	// tools is nil while the server is absent.
	tools *serverTools
	// cause says why the server could not be listed at start-up and, when
	// an attempt since has ended (tried set), lastCause why it failed;
	// lastAt is when that attempt began.
	cause, lastCause string
	lastAt           time.Time
	tried            bool
	// triedAt is when the last attempt began (start-up counts).
	triedAt time.Time
	// attempt is the connection attempt in flight (nil: none).
	attempt chan struct{}
	// soughtAt is when the present server was last listed again for a
	// tool a run named that it did not offer.
	soughtAt time.Time
}

func (sl *slot) prefix() string { return sl.server.Name + NameSeparator }

// retryEvery is the least time between two attempts a run brings about
// to reach sl's server (or to list it for a tool it lacks).
func (c *Catalog) retryEvery(sl *slot) time.Duration {
	if n := sl.server.RetryIntervalSeconds; n > 0 {
		return time.Duration(n) * time.Second
	}
	return c.every
}

// connectTimeout bounds an attempt after start-up to connect to and list
// sl's server, and a run's wait for one.
func (c *Catalog) connectTimeout(sl *slot) time.Duration {
	if n := sl.server.ConnectTimeoutSeconds; n > 0 {
		return time.Duration(n) * time.Second
	}
	return c.timeout
}

// Open connects to every server of the file at once, lists its tools and
// builds the catalog. A server that cannot be reached (or whose header
// secret cannot be read) is left out and reported by Absent; the error is
// non-nil only when the tools cannot be exposed as configured: two tools
// of a server become the same exposed name, or a name is too long.
func Open(ctx context.Context, f *File, o Options) (*Catalog, error) {
	c := &Catalog{o: o, logger: o.Logger, getenv: o.Getenv, timeout: o.ConnectTimeout, every: o.RetryInterval}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.timeout <= 0 {
		c.timeout = DefaultConnectTimeout
	}
	if c.every <= 0 {
		c.every = DefaultRetryInterval
	}
	if c.getenv == nil {
		c.getenv = func(string) string { return "" }
	}
	results := make([]*serverTools, len(f.Servers))
	errs := make([]error, len(f.Servers))
	started := c.now()
	var wg sync.WaitGroup
	for i, s := range f.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, c.timeout)
			defer cancel()
			results[i], errs[i] = c.openServer(ctx, s)
		}()
	}
	wg.Wait()
	var fatal []error
	for i, s := range f.Servers {
		sl := &slot{server: s, triedAt: started}
		c.slots = append(c.slots, sl)
		var ce *configError
		switch {
		case errors.As(errs[i], &ce):
			fatal = append(fatal, errs[i])
		case errs[i] != nil:
			// The reason reaches API callers (a run that asks for the
			// server's tools): it says what happened, never the transport's
			// message, which holds the server's address; the log has it.
			sl.cause = unavailableCause(errs[i])
			c.logger.ErrorContext(ctx, "mcp server unavailable; its tools are absent", "server", s.Name, "url", s.shownURL(), "err", s.scrub(errs[i]))
		default:
			sl.tools = results[i]
			c.logger.InfoContext(ctx, "mcp server tools listed", "server", s.Name, "tools", len(results[i].tools))
		}
	}
	if len(fatal) > 0 {
		c.Close()
		return nil, errors.Join(fatal...)
	}
	return c, nil
}

// configError is a start-up error of the configuration (not of the server).
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func (c *Catalog) now() time.Time {
	if c.o.Now != nil {
		return c.o.Now()
	}
	return time.Now()
}

func (c *Catalog) openServer(ctx context.Context, s Server) (*serverTools, error) {
	headers, err := resolveHeaders(ctx, s, c.o.Secrets, c.getenv)
	if err != nil {
		return nil, err
	}
	st := &serverTools{server: s, logger: c.logger, added: func() { c.rev.Add(1) }, now: c.now, begun: c.now()}
	st.conn = newConn(s, headers, c.o.Transport, c.logger, c.o.Version)
	listed, err := st.conn.listTools(ctx)
	if err != nil {
		st.conn.Close()
		return nil, err
	}
	st.listedAt = time.Now()
	byExposed := map[string]string{}
	for _, mt := range listed {
		if !s.offers(mt.Name) {
			continue
		}
		t, err := newRemoteTool(st, mt)
		if err != nil {
			st.conn.Close()
			return nil, fmt.Errorf("tool %s: %w", mt.Name, err)
		}
		name := t.Definition().Name
		if other, dup := byExposed[name]; dup {
			st.conn.Close()
			return nil, &configError{fmt.Sprintf("server %s: tools %q and %q would both be exposed as %q; exclude one of them", s.Name, other, mt.Name, name)}
		}
		if len(name) > MaxToolNameLen {
			st.conn.Close()
			return nil, &configError{fmt.Sprintf("server %s: tool %q would be exposed as %q, %d characters; providers allow %d: exclude it or shorten the server name", s.Name, mt.Name, name, len(name), MaxToolNameLen)}
		}
		byExposed[name] = mt.Name
		st.tools = append(st.tools, t)
	}
	for _, want := range append(append([]string(nil), s.Include...), sortedKeys(s.Approval)...) {
		if !hasTool(listed, want) {
			c.logger.WarnContext(ctx, "the tool-sources file names a tool the server does not offer", "server", s.Name, "tool", want)
		}
	}
	sortTools(st.tools)
	return st, nil
}

func sortTools(tools []*remoteTool) {
	sort.Slice(tools, func(i, j int) bool { return tools[i].Definition().Name < tools[j].Definition().Name })
}

// Tools returns the tools of every reachable server, by server in file
// order, then by name. A nil catalog has none.
func (c *Catalog) Tools() []loop.Tool {
	if c == nil {
		return nil
	}
	var out []loop.Tool
	for _, st := range c.present() {
		for _, t := range st.current() {
			out = append(out, t)
		}
	}
	return out
}

// present returns the servers whose tools are listed, in file order.
func (c *Catalog) present() []*serverTools {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*serverTools
	for _, sl := range c.slots {
		if sl.tools != nil {
			out = append(out, sl.tools)
		}
	}
	return out
}

// Absent lists the configured servers whose tools are absent, and why.
func (c *Catalog) Absent() []Absence {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Absence
	for _, sl := range c.slots {
		if sl.tools == nil {
			out = append(out, Absence{Server: sl.server.Name, Prefix: sl.prefix(), Reason: c.reason(sl)})
		}
	}
	return out
}

// reason says why an absent server's tools are absent, for API callers:
// what went wrong, never the transport's message, and when the server was
// last tried. The caller holds c.mu.
func (c *Catalog) reason(sl *slot) string {
	again := fmt.Sprintf("it is tried again when a run needs its tools, at most every %s", c.retryEvery(sl))
	if every := sl.server.ListEvery(); every > 0 {
		again += fmt.Sprintf(", and every %s without one", every)
	}
	if !sl.tried {
		return fmt.Sprintf("MCP server %s was unavailable when this process started (%s); %s", sl.server.Name, sl.cause, again)
	}
	return fmt.Sprintf("MCP server %s was unavailable when this process started (%s) and when last tried, at %s (%s); %s",
		sl.server.Name, sl.cause, sl.lastAt.UTC().Format(time.RFC3339), sl.lastCause, again)
}

// NoteAbsent tells tb why the absent servers' tools are missing.
func (c *Catalog) NoteAbsent(tb *loop.Toolbox) {
	for _, a := range c.Absent() {
		tb.NoteAbsent(a.Prefix, a.Reason)
	}
}

// Revision changes whenever Tools or NoteAbsent would answer otherwise: a
// server came back or was tried again in vain, or a listing added tools.
func (c *Catalog) Revision() uint64 {
	if c == nil {
		return 0
	}
	return c.rev.Load()
}

// Seek looks again for tools a run needs that the process lacks (see
// loop.ToolSource): an absent server named by a tool of names (its prefix),
// or every absent server when absent is set, is connected to and listed
// again; a present server is listed again when names holds a tool under
// its prefix it does not offer (a tool it may have added since). Each
// server is tried at most once per its retry interval
// (retry_interval_seconds, else RetryInterval; start-up counts); a run
// that comes while an attempt is in flight waits for that one. An attempt
// is bounded by its server's connect timeout (connect_timeout_seconds,
// else ConnectTimeout), the wait of Seek by the longest of those it waits
// for, and by ctx (an attempt that takes longer, say while the MCP SDK
// tears a session down, goes on and its outcome serves the runs after
// it).
func (c *Catalog) Seek(ctx context.Context, names []string, absent bool) {
	if c == nil {
		return
	}
	var (
		waits []chan struct{}
		wait  time.Duration
	)
	now := c.now()
	c.mu.Lock()
	for _, sl := range c.slots {
		named := slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, sl.prefix()) })
		switch {
		case c.closed:
		case sl.tools == nil && (named || absent):
			if sl.attempt == nil && now.Sub(sl.triedAt) >= c.retryEvery(sl) {
				sl.attempt = make(chan struct{})
				sl.triedAt = now
				go c.retry(context.WithoutCancel(ctx), sl, now, sl.attempt)
			}
			if sl.attempt != nil {
				waits = append(waits, sl.attempt)
				wait = max(wait, c.connectTimeout(sl))
			}
		case sl.tools != nil && named && now.Sub(sl.soughtAt) >= c.retryEvery(sl):
			sl.soughtAt = now
			done := make(chan struct{})
			waits = append(waits, done)
			bound := c.connectTimeout(sl)
			wait = max(wait, bound)
			go func(st *serverTools) {
				defer close(done)
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
				defer cancel()
				_ = st.refresh(ctx) // a failure is logged; the tool stays missing
			}(sl.tools)
		}
	}
	c.mu.Unlock()
	if len(waits) == 0 {
		return
	}
	bound := time.NewTimer(wait)
	defer bound.Stop()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		case <-bound.C:
			return
		}
	}
}

// retry connects to the absent server of sl and lists it (an attempt that
// began at), and on success its tools join the catalog. It ends by closing
// done.
func (c *Catalog) retry(ctx context.Context, sl *slot, at time.Time, done chan struct{}) {
	defer close(done)
	s := sl.server
	ctx, cancel := context.WithTimeout(ctx, c.connectTimeout(sl))
	defer cancel()
	st, err := c.openServer(ctx, s)
	if err == nil {
		err = fits(st.tools)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sl.attempt = nil
	switch {
	case c.closed:
		if st != nil {
			_ = st.conn.Close()
		}
		return
	case err != nil:
		if st != nil {
			_ = st.conn.Close()
		}
		var ce *configError
		if errors.As(err, &ce) {
			// Not the server's fault, and nothing a new attempt changes
			// until the server or the file does; said as it is (it names
			// tools, never an address).
			sl.lastCause = ce.msg
		} else {
			sl.lastCause = unavailableCause(err)
		}
		sl.lastAt, sl.tried = at, true
		c.logger.WarnContext(ctx, "mcp server still unavailable; its tools stay absent", "server", s.Name, "url", s.shownURL(), "err", s.scrub(err))
	default:
		sl.tools = st
		c.logger.InfoContext(ctx, "mcp server listed after start-up; its tools are offered from now on", "server", s.Name, "tools", len(st.tools))
	}
	c.rev.Add(1)
}

// Relist lists again every server whose list_every_seconds have passed
// since it was last listed (a listing a run brought about counts, and so
// does start-up): a present server is listed (tools/list), which
// refreshes the process's copy of its tools and adds the tools it offers
// now that the process did not, gated by the file as at start-up; an
// absent server is connected to and listed, as Seek does, and its tools
// join when it answers. A server with a listing or an attempt in flight
// is not asked again. Relist waits for the listings it began, each
// bounded by its server's connect timeout and by ctx's deadline (not by
// its cancellation: a listing other runs share is not cut short), and
// returns how long until the next server falls due; ok is false when no
// server sets list_every_seconds (or the catalog is closed). Runs keep the
// toolbox snapshot they took: what a listing adds is offered to the runs
// that start after it.
func (c *Catalog) Relist(ctx context.Context) (next time.Duration, ok bool) {
	if c == nil {
		return 0, false
	}
	lctx := context.WithoutCancel(ctx)
	if dl, has := ctx.Deadline(); has {
		var cancel context.CancelFunc
		lctx, cancel = context.WithDeadline(lctx, dl)
		defer cancel()
	}
	var wg sync.WaitGroup
	now := c.now()
	c.mu.Lock()
	for _, sl := range c.slots {
		every := sl.server.ListEvery()
		if c.closed || every <= 0 {
			continue
		}
		last := sl.triedAt
		if sl.tools != nil {
			last = sl.tools.lastBegun()
		}
		due := every - now.Sub(last)
		busy := sl.attempt != nil || (sl.tools != nil && sl.tools.busy())
		if due <= 0 && !busy {
			due = every
			if sl.tools == nil {
				attempt := make(chan struct{})
				sl.attempt, sl.triedAt = attempt, now
				wg.Go(func() { c.retry(lctx, sl, now, attempt) })
			} else {
				st, bound := sl.tools, c.connectTimeout(sl)
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(lctx, bound)
					defer cancel()
					_ = st.refresh(ctx) // a failure is logged; the process keeps its copy
				})
			}
		}
		if due <= 0 {
			// In flight: look again once it may have ended.
			due = c.connectTimeout(sl)
		}
		if !ok || due < next {
			next = due
		}
		ok = true
	}
	c.mu.Unlock()
	wg.Wait()
	return next, ok
}

// minRelistWait is the least time KeepListed waits between two looks.
const minRelistWait = 100 * time.Millisecond

// KeepListed lists the servers that set list_every_seconds again as they
// fall due (Relist), until ctx ends or the catalog is closed; it returns
// at once when no server sets it. It is the local server's background
// loop; a Lambda calls Relist between invocations' work instead, as no
// goroutine may outlive an invocation. When ctx ends while a listing is in
// flight, KeepListed returns once it ended (at most the server's connect
// timeout).
func (c *Catalog) KeepListed(ctx context.Context) {
	for ctx.Err() == nil {
		next, ok := c.Relist(ctx)
		if !ok {
			return
		}
		t := time.NewTimer(max(next, minRelistWait))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// fits reports a tool a toolbox would refuse (a schema that does not
// compile), so that a server listed after start-up never makes the
// process's toolbox unusable.
func fits(tools []*remoteTool) error {
	for _, t := range tools {
		if _, err := loop.NewToolbox(t); err != nil {
			return &configError{err.Error()}
		}
	}
	return nil
}

// Close ends every server session.
func (c *Catalog) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, st := range c.present() {
		if err := st.conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func hasTool(listed []*mcp.Tool, name string) bool {
	for _, t := range listed {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Summary describes the catalog in one line per server, for start-up output.
func (c *Catalog) Summary() string {
	var b strings.Builder
	for _, s := range c.present() {
		var reads, gated, unattended int
		tools := s.current()
		for _, t := range tools {
			def := t.Definition()
			switch {
			case def.Effect == loop.EffectRead && !def.RequiresApproval:
				reads++
			case def.NoApproval:
				unattended++ // a write marked approval "never"
			default:
				gated++
			}
		}
		fmt.Fprintf(&b, "mcp server %s: %d %s (%d %s at once, %d %s approval", s.server.Name,
			len(tools), plural(len(tools), "tool", "tools"), reads, plural(reads, "runs", "run"), gated, plural(gated, "needs", "need"))
		if unattended > 0 {
			fmt.Fprintf(&b, ", %d %s without approval", unattended, plural(unattended, "write runs", "writes run"))
		}
		b.WriteString(")\n")
	}
	for _, a := range c.Absent() {
		fmt.Fprintf(&b, "mcp server %s: absent (%s)\n", a.Server, a.Reason)
	}
	return b.String()
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// unavailableCause says in words fit for API callers why a server could
// not be listed at start-up.
func unavailableCause(err error) string {
	if c := transportCause(err); c != "" {
		return c
	}
	return "its tools could not be listed; the server's log has the error"
}

// transportCause says in words fit for a run's readers (the model, API
// callers, approvers) what went wrong between agentgate and an MCP server,
// or "" when the error is none of the kinds it knows. It never quotes the
// transport's message, which names the server's address; the log line of
// the failure has the whole error.
func transportCause(err error) string {
	var (
		he  *headerError
		dns *net.DNSError
	)
	switch {
	case errors.As(err, &he):
		return fmt.Sprintf("the value of its request header %s could not be read", he.name)
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.As(err, &dns):
		return "its host name could not be resolved"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was lost"
	}
	return ""
}
