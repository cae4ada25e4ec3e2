package mcptool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/strictjson"
)

// File is a parsed and validated tool-sources file.
type File struct {
	// Servers are the MCP servers, in file order.
	Servers ServerEntries `json:"servers"`
}

// ServerEntries are the servers of a tool-sources file. They decode
// strictly (an unknown field is an error) and an error names the server
// it is in, by index and name, and the field, as validate's do:
// servers[0] (crm): list_every_seconds: json: cannot unmarshal number 1.5
// into int.
type ServerEntries []Server

// UnmarshalJSON decodes the servers one by one, so that an error names
// its server.
func (ss *ServerEntries) UnmarshalJSON(data []byte) error {
	return strictjson.Entries((*[]Server)(ss), data, "servers", serverName, "an array of servers", "a server object")
}

// serverName names server i of a file by its index and, when it has one
// that decodes, its name, as validate does.
func serverName(i int, raw json.RawMessage) string {
	var named struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Name == "" {
		return fmt.Sprintf("servers[%d]", i)
	}
	return fmt.Sprintf("servers[%d] (%s)", i, named.Name)
}

// Server is one remote MCP server of the tool-sources file.
type Server struct {
	// Name prefixes the server's tools: "<name>__<tool>".
	Name string `json:"name"`
	// URL is the streamable-HTTP endpoint (for example https://crm.example.com/mcp).
	URL string `json:"url"`
	// Headers are sent with every request; their values come from Secrets
	// Manager or (locally) the environment, never from the file.
	Headers map[string]HeaderValue `json:"headers,omitempty"`
	// Include, when not empty, keeps only these tools (the server's names).
	Include []string `json:"include,omitempty"`
	// Exclude drops these tools (the server's names).
	Exclude []string `json:"exclude,omitempty"`
	// TimeoutSeconds bounds one tool call, retries included (default 30).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// ListEverySeconds, when set, lists the server again this often
	// without a run asking (a server that is absent: tried again), so a
	// tool it adds reaches runs that name no tools (0: only listings a run
	// brings about).
	ListEverySeconds int `json:"list_every_seconds,omitempty"`
	// RetryIntervalSeconds is the least time between two attempts a run
	// brings about to reach the server while it is absent, and between two
	// listings of it for a tool a run names that it does not offer (0:
	// DefaultRetryInterval).
	RetryIntervalSeconds int `json:"retry_interval_seconds,omitempty"`
	// ConnectTimeoutSeconds bounds each attempt after start-up to connect
	// to and list the server, and how long a run waits for one (0:
	// Options.ConnectTimeout, the bound of the start-up attempt).
	ConnectTimeoutSeconds int `json:"connect_timeout_seconds,omitempty"`
	// TrustAnnotations lets the server's readOnlyHint make a tool a read.
	TrustAnnotations bool `json:"trust_annotations,omitempty"`
	// Approval overrides the approval rule per tool (the server's names).
	Approval map[string]Approval `json:"approval,omitempty"`
}

// HeaderValue says where a header's value comes from: a Secrets Manager
// secret (SecretARN, optionally one JSONKey of a JSON secret) or an
// environment variable (Env; local server only). Prefix is prepended, for
// example "Bearer ".
type HeaderValue struct {
	SecretARN string `json:"secret_arn,omitempty"`
	JSONKey   string `json:"json_key,omitempty"`
	Env       string `json:"env,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
}

// Approval is a per-tool override of the approval rule.
type Approval string

// The approval overrides.
const (
	// ApprovalAlways asks a human before every call, even of a read.
	ApprovalAlways Approval = "always"
	// ApprovalNever runs the tool without asking; a write is still fenced.
	ApprovalNever Approval = "never"
	// ApprovalDefault keeps the rule: reads run, everything else asks.
	ApprovalDefault Approval = "default"
)

// Limits of the tool-sources file and of remote tools.
const (
	// DefaultTimeout bounds a tool call when the file sets no timeout_seconds.
	DefaultTimeout = 30 * time.Second
	// MaxTimeoutSeconds is the largest timeout_seconds (the Lambda limit).
	MaxTimeoutSeconds = 900
	// MaxListEverySeconds is the largest list_every_seconds (a day).
	MaxListEverySeconds = 24 * 60 * 60
	// MaxRetryIntervalSeconds is the largest retry_interval_seconds (an
	// hour: a server that comes back is tried within it).
	MaxRetryIntervalSeconds = 60 * 60
	// MaxConnectTimeoutSeconds is the largest connect_timeout_seconds: a
	// run's POST /runs may wait for an attempt, and API Gateway ends a
	// request after 29 s.
	MaxConnectTimeoutSeconds = 20
	// MaxServerNameLen is the longest server name.
	MaxServerNameLen = 32
	// MaxToolNameLen is the longest exposed name "<server>__<tool>": the
	// limit of OpenAI, Bedrock (Converse) and Anthropic alike.
	MaxToolNameLen = 64
	// MaxFileBytes is the largest tool-sources file.
	MaxFileBytes = 1 << 20
)

// serverNameRe: a letter first, then letters, digits, "-" and single "_",
// not ending in "_" (so "__" in an exposed name always ends the server name).
var serverNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*$`)

// secretARNRe is a Secrets Manager secret ARN (full or partial).
var secretARNRe = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$`)

// envNameRe is a portable environment variable name.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedHeaders are set by the MCP transport and cannot be configured.
var reservedHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true, "Connection": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true, "Transfer-Encoding": true,
}

// ParseOptions say where the file is used.
type ParseOptions struct {
	// AllowEnvHeaders permits header values from environment variables (the
	// local server); on Lambda only Secrets Manager is allowed, so no secret
	// value ever sits in a function's environment.
	AllowEnvHeaders bool
}

// ReadFile reads and parses a tool-sources file.
func ReadFile(path string, o ParseOptions) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tool sources: %w", err)
	}
	f, err := ParseFile(raw, o)
	if err != nil {
		return nil, fmt.Errorf("tool sources %s: %w", path, err)
	}
	return f, nil
}

// ParseFile decodes a tool-sources file strictly (unknown fields are
// refused) and validates it; every error names the server and the field.
func ParseFile(raw []byte, o ParseOptions) (*File, error) {
	if len(raw) > MaxFileBytes {
		return nil, fmt.Errorf("the file has %d bytes, at most %d are allowed", len(raw), MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a valid tool-sources file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a valid tool-sources file: trailing data after the JSON object")
	}
	if err := f.validate(o); err != nil {
		return nil, err
	}
	return &f, nil
}

func (f *File) validate(o ParseOptions) error {
	var errs []error
	seen := map[string]int{}
	for i := range f.Servers {
		s := &f.Servers[i]
		where := fmt.Sprintf("servers[%d]", i)
		if s.Name != "" {
			where = fmt.Sprintf("servers[%d] (%s)", i, s.Name)
		}
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s: %s", where, field, fmt.Sprintf(format, args...)))
		}
		switch {
		case s.Name == "":
			bad("name", "is required")
		case len(s.Name) > MaxServerNameLen || !serverNameRe.MatchString(s.Name):
			bad("name", "%q must start with a letter and hold at most %d letters, digits, '-' and single '_' (not at the end)", s.Name, MaxServerNameLen)
		}
		if j, dup := seen[s.Name]; dup && s.Name != "" {
			bad("name", "%q is already used by servers[%d]", s.Name, j)
		}
		seen[s.Name] = i
		u, err := url.Parse(s.URL)
		if s.URL == "" {
			bad("url", "is required")
		} else if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			shown := "it" // unparsable: it may hold a secret we cannot find
			if err == nil {
				shown = fmt.Sprintf("%q", s.shownURL())
			}
			bad("url", "%s must be an absolute http(s) URL without user info", shown)
		} else if u.Scheme == "http" && len(s.Headers) > 0 && !loopback(u.Hostname()) {
			bad("url", "headers would travel in clear text to %s: use https (plain http is allowed for loopback hosts only)", u.Host)
		}
		for name, hv := range s.Headers {
			field := "headers." + name
			switch {
			case !validHeaderName(name):
				bad(field, "is not a valid HTTP header name")
			case reservedHeaders[http.CanonicalHeaderKey(name)]:
				bad(field, "is set by the MCP transport and cannot be configured")
			}
			switch {
			case hv.SecretARN != "" && hv.Env != "":
				bad(field, "give secret_arn or env, not both")
			case hv.SecretARN == "" && hv.Env == "":
				bad(field, "give secret_arn (a Secrets Manager ARN) or, locally, env (an environment variable); values never sit in the file")
			case hv.SecretARN != "" && !secretARNRe.MatchString(hv.SecretARN):
				bad(field+".secret_arn", "%q is not a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>)", hv.SecretARN)
			case hv.Env != "" && !o.AllowEnvHeaders:
				bad(field+".env", "environment variables are for the local server; on Lambda use secret_arn")
			case hv.Env != "" && !envNameRe.MatchString(hv.Env):
				bad(field+".env", "%q is not an environment variable name", hv.Env)
			case hv.JSONKey != "" && hv.SecretARN == "":
				bad(field+".json_key", "only goes with secret_arn")
			}
			if strings.ContainsAny(hv.Prefix, "\r\n") {
				bad(field+".prefix", "must not hold line breaks")
			}
		}
		if s.TimeoutSeconds < 0 || s.TimeoutSeconds > MaxTimeoutSeconds {
			bad("timeout_seconds", "%d must be between 1 and %d (0: %s)", s.TimeoutSeconds, MaxTimeoutSeconds, DefaultTimeout)
		}
		if s.ListEverySeconds < 0 || s.ListEverySeconds > MaxListEverySeconds {
			bad("list_every_seconds", "%d must be between 1 and %d (0: listed only when a run brings it about)", s.ListEverySeconds, MaxListEverySeconds)
		}
		if s.RetryIntervalSeconds < 0 || s.RetryIntervalSeconds > MaxRetryIntervalSeconds {
			bad("retry_interval_seconds", "%d must be between 1 and %d (0: %s)", s.RetryIntervalSeconds, MaxRetryIntervalSeconds, DefaultRetryInterval)
		}
		if s.ConnectTimeoutSeconds < 0 || s.ConnectTimeoutSeconds > MaxConnectTimeoutSeconds {
			bad("connect_timeout_seconds", "%d must be between 1 and %d (0: the bound of the start-up attempt)", s.ConnectTimeoutSeconds, MaxConnectTimeoutSeconds)
		}
		checkNames := func(field string, names []string) {
			dup := map[string]bool{}
			for k, n := range names {
				if strings.TrimSpace(n) == "" {
					bad(fmt.Sprintf("%s[%d]", field, k), "is empty")
				}
				if dup[n] {
					bad(fmt.Sprintf("%s[%d]", field, k), "%q is listed twice", n)
				}
				dup[n] = true
			}
		}
		checkNames("include", s.Include)
		checkNames("exclude", s.Exclude)
		for tool, a := range s.Approval {
			switch a {
			case ApprovalAlways, ApprovalNever, ApprovalDefault:
			default:
				bad("approval."+tool, "%q must be %q, %q or %q", a, ApprovalAlways, ApprovalNever, ApprovalDefault)
			}
			if !s.offers(tool) {
				bad("approval."+tool, "names a tool that include/exclude leave out")
			}
		}
	}
	return errors.Join(errs...)
}

// offers reports whether include/exclude keep the server's tool name.
func (s *Server) offers(name string) bool {
	if len(s.Include) > 0 && !contains(s.Include, name) {
		return false
	}
	return !contains(s.Exclude, name)
}

// Timeout is the server's per-call timeout.
func (s *Server) Timeout() time.Duration {
	if s.TimeoutSeconds > 0 {
		return time.Duration(s.TimeoutSeconds) * time.Second
	}
	return DefaultTimeout
}

// ListEvery is how often the server is listed without a run asking (0:
// never).
func (s *Server) ListEvery() time.Duration {
	return time.Duration(s.ListEverySeconds) * time.Second
}

// SecretARNs returns every Secrets Manager ARN the file names, once each,
// in file order (what the workers' roles must be allowed to read).
func (f *File) SecretARNs() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range f.Servers {
		for _, name := range sortedKeys(s.Headers) {
			if arn := s.Headers[name].SecretARN; arn != "" && !seen[arn] {
				seen[arn] = true
				out = append(out, arn)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// EnvFile is the environment variable that names a deployment's
// tool-sources file (read by the startrun and resume functions at init).
const EnvFile = "AGENTGATE_TOOL_SOURCES"

// LayerPath is where the CDK stack's tool-sources layer puts the file on
// Lambda (layers are extracted under /opt).
const LayerPath = "/opt/agentgate/tool-sources.json"

// shownURL is the server's URL as logs and messages show it: without a
// password, query or fragment (they may hold keys).
func (s Server) shownURL() string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}

// scrub returns err with the server URL's query and fragment (which may
// hold keys) cut out of its message, for the log: the transport's errors
// quote the URL they were sent to. errors.Is and errors.As see err as it was.
func (s Server) scrub(err error) error {
	if err == nil {
		return nil
	}
	u, perr := url.Parse(s.URL)
	if perr != nil || (u.RawQuery == "" && u.Fragment == "") {
		return err
	}
	msg := err.Error()
	for _, part := range []string{"?" + u.RawQuery, "#" + u.Fragment, "#" + u.EscapedFragment()} {
		if len(part) > 1 {
			// As given, and as %q quotes it (a url.Error quotes its URL).
			quoted := strings.TrimSuffix(strings.TrimPrefix(strconv.Quote(part), `"`), `"`)
			msg = strings.ReplaceAll(strings.ReplaceAll(msg, part, ""), quoted, "")
		}
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubbedError is an error with a message cleaned of secrets.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
