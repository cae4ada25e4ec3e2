package mcptool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
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
	// start-up (0: DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// Version is announced to servers as the client version.
	Version string
	Logger  *slog.Logger
}

// DefaultConnectTimeout bounds the start-up connection and listing of one server.
const DefaultConnectTimeout = 10 * time.Second

// Absence is a configured server whose tools are absent, and why.
type Absence struct {
	Server string
	// Prefix is what the server's exposed tool names start with.
	Prefix string
	Reason string
}

// Catalog holds the tools of every reachable configured server.
type Catalog struct {
	servers []*serverTools
	absent  []Absence
}

// Open connects to every server of the file at once, lists its tools and
// builds the catalog. A server that cannot be reached (or whose header
// secret cannot be read) is left out and reported by Absent; the error is
// non-nil only when the tools cannot be exposed as configured: two tools
// of a server become the same exposed name, or a name is too long.
func Open(ctx context.Context, f *File, o Options) (*Catalog, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	c := &Catalog{}
	results := make([]*serverTools, len(f.Servers))
	errs := make([]error, len(f.Servers))
	var wg sync.WaitGroup
	for i, s := range f.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			results[i], errs[i] = openServer(ctx, s, o, getenv, logger)
		}()
	}
	wg.Wait()
	var fatal []error
	for i, s := range f.Servers {
		var ce *configError
		switch {
		case errors.As(errs[i], &ce):
			fatal = append(fatal, errs[i])
		case errs[i] != nil:
			// The reason reaches API callers (a run that asks for the
			// server's tools): it says what happened, never the transport's
			// message, which holds the server's address; the log has it.
			reason := fmt.Sprintf("MCP server %s was unavailable when this process started (%s)", s.Name, unavailableCause(errs[i]))
			logger.ErrorContext(ctx, "mcp server unavailable; its tools are absent", "server", s.Name, "url", s.shownURL(), "err", s.scrub(errs[i]))
			c.absent = append(c.absent, Absence{Server: s.Name, Prefix: s.Name + NameSeparator, Reason: reason})
		default:
			c.servers = append(c.servers, results[i])
			logger.InfoContext(ctx, "mcp server tools listed", "server", s.Name, "tools", len(results[i].tools))
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

func openServer(ctx context.Context, s Server, o Options, getenv func(string) string, logger *slog.Logger) (*serverTools, error) {
	headers, err := resolveHeaders(ctx, s, o.Secrets, getenv)
	if err != nil {
		return nil, err
	}
	st := &serverTools{server: s, logger: logger}
	st.conn = newConn(s, headers, o.Transport, logger, o.Version)
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
			logger.WarnContext(ctx, "the tool-sources file names a tool the server does not offer", "server", s.Name, "tool", want)
		}
	}
	sort.Slice(st.tools, func(i, j int) bool { return st.tools[i].Definition().Name < st.tools[j].Definition().Name })
	return st, nil
}

// Tools returns the tools of every reachable server, by server in file
// order, then by name. A nil catalog has none.
func (c *Catalog) Tools() []loop.Tool {
	if c == nil {
		return nil
	}
	var out []loop.Tool
	for _, s := range c.servers {
		for _, t := range s.tools {
			out = append(out, t)
		}
	}
	return out
}

// Absent lists the configured servers whose tools are absent, and why.
func (c *Catalog) Absent() []Absence {
	if c == nil {
		return nil
	}
	return append([]Absence(nil), c.absent...)
}

// NoteAbsent tells tb why the absent servers' tools are missing.
func (c *Catalog) NoteAbsent(tb *loop.Toolbox) {
	if c == nil {
		return
	}
	for _, a := range c.absent {
		tb.NoteAbsent(a.Prefix, a.Reason)
	}
}

// Close ends every server session.
func (c *Catalog) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, s := range c.servers {
		if err := s.conn.Close(); err != nil {
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
	for _, s := range c.servers {
		var reads, gated, unattended int
		for _, t := range s.tools {
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
		fmt.Fprintf(&b, "mcp server %s: %d tools (%d run at once, %d need approval", s.server.Name, len(s.tools), reads, gated)
		if unattended > 0 {
			fmt.Fprintf(&b, ", %d write(s) run without approval", unattended)
		}
		b.WriteString(")\n")
	}
	for _, a := range c.absent {
		fmt.Fprintf(&b, "mcp server %s: absent (%s)\n", a.Server, a.Reason)
	}
	return b.String()
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
