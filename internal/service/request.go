package service

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/toolpattern"
	"github.com/agentgate/agentgate/internal/webhook"
)

// Limits on a start request.
const (
	MaxPromptBytes     = 64 << 10
	MinApprovalTTL     = time.Minute
	MaxApprovalTTL     = 7 * 24 * time.Hour
	DefaultApprovalTTL = 24 * time.Hour
	MaxMetadataEntries = 20
	MaxRequireApproval = 64
)

// StartRequest is the body of POST /runs, stored on the run for the worker.
type StartRequest struct {
	// Prompt is the user's request; give Prompt or Messages, not both.
	Prompt string `json:"prompt,omitempty"`
	// Messages is an opening conversation ending with a user message.
	Messages []loop.Message `json:"messages,omitempty"`
	// System is the system text.
	System string `json:"system,omitempty"`
	// Model overrides the configured model id of the provider (optional).
	Model string `json:"model,omitempty"`
	// AllowedTools limits the tools the model may call (left out: all). An
	// empty list is refused rather than read as "all" (or as "none").
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Approvers may decide this run's approvals: e-mail addresses get
	// approval links, other principals (IAM ARNs, local users) decide
	// through the API.
	Approvers []string `json:"approvers"`
	// ApprovalTTLSeconds is the approval window (default 24 h, 60 s to 7 days).
	ApprovalTTLSeconds int64 `json:"approval_ttl_seconds,omitempty"`
	// MaxIterations, MaxTokens and MaxOutputTokens are the run's budgets.
	MaxIterations   int   `json:"max_iterations,omitempty"`
	MaxTokens       int64 `json:"max_tokens,omitempty"`
	MaxOutputTokens int   `json:"max_output_tokens,omitempty"`
	// DenialEndsRun ends the run (approval_denied) when any call is denied.
	DenialEndsRun bool `json:"denial_ends_run,omitempty"`
	// FourEyes forbids the initiator to decide the run's approvals, even
	// when listed as an approver: a second person must release the writes.
	// An explicit false where the deployment policy requires four-eyes is
	// refused (a run may only tighten the policy).
	FourEyes *bool `json:"four_eyes,omitempty"`
	// RequiredApprovals raises how many distinct persons must approve each
	// call that needs approval (0: the policy's; may only tighten it).
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// RequireApproval lists tool patterns whose calls need approval in this
	// run even where the deployment policy allows them.
	RequireApproval []string `json:"require_approval,omitempty"`
	// Metadata is the caller's own labels, returned as given.
	Metadata map[string]string `json:"metadata,omitempty"`
	// WebhookURL is where signed webhook events about the run are POSTed
	// (optional; the deployment's target policy applies).
	WebhookURL string `json:"webhook_url,omitempty"`
	// WebhookEvents are the event types wanted (default: all).
	WebhookEvents []string `json:"webhook_events,omitempty"`
	// ClientTools are tools the caller executes itself: their approved
	// calls are handed over (WAITING_FOR_TOOL_RESULTS) and their results
	// submitted through POST /runs/{id}/tool-results.
	ClientTools []ClientToolSpec `json:"client_tools,omitempty"`
	// ToolResultsTTLSeconds is how long the caller has to submit results
	// (default 1 h, 10 s to 7 days).
	ToolResultsTTLSeconds int64 `json:"tool_results_ttl_seconds,omitempty"`
	// ToolExecutors may submit results besides the initiator: principals
	// and "group:<name>" groups of the directory (any member at the time
	// of the submission).
	ToolExecutors []string `json:"tool_executors,omitempty"`
}

// Validate checks the request against the tools that exist. Every error is
// a *runs.Error whose message is meant for the API caller: ETooLarge for a
// size or count limit, EInvalid for anything else.
func (r *StartRequest) Validate(tools *loop.Toolbox) error {
	switch {
	// An empty list where leaving the member out means "all" (or where the
	// spec wants at least one entry) is refused: a caller who wrote
	// "allowed_tools": [] meant to allow no tool, and would get them all.
	case r.AllowedTools != nil && len(r.AllowedTools) == 0:
		return runs.Errorf(runs.EInvalid, "allowed_tools is empty: name at least one tool, or leave it out for all of them")
	case r.Messages != nil && len(r.Messages) == 0:
		return runs.Errorf(runs.EInvalid, "messages is empty: give at least one message, or give prompt instead")
	case r.Prompt == "" && len(r.Messages) == 0:
		return runs.Errorf(runs.EInvalid, "give prompt or messages")
	case r.Prompt != "" && len(r.Messages) > 0:
		return runs.Errorf(runs.EInvalid, "give prompt or messages, not both")
	case len(r.Prompt) > MaxPromptBytes || len(r.System) > MaxPromptBytes:
		return runs.Errorf(runs.ETooLarge, "prompt and system are limited to %d bytes each", MaxPromptBytes)
	case len(r.Approvers) > runs.MaxApprovers:
		return runs.Errorf(runs.ETooLarge, "approvers: %d listed, at most %d allowed", len(r.Approvers), runs.MaxApprovers)
	case len(r.Metadata) > MaxMetadataEntries:
		return runs.Errorf(runs.ETooLarge, "metadata: %d entries, at most %d allowed", len(r.Metadata), MaxMetadataEntries)
	case len(r.RequireApproval) > MaxRequireApproval:
		return runs.Errorf(runs.ETooLarge, "require_approval: %d patterns, at most %d allowed", len(r.RequireApproval), MaxRequireApproval)
	case slices.ContainsFunc(r.RequireApproval, func(p string) bool { return utf8.RuneCountInString(p) > toolpattern.MaxLen }):
		return runs.Errorf(runs.ETooLarge, "require_approval: a pattern is longer than %d characters", toolpattern.MaxLen)
	case r.RequiredApprovals < 0 || r.RequiredApprovals > policy.MaxRequiredApprovals:
		return runs.Errorf(runs.EInvalid, "required_approvals must be between 1 and %d", policy.MaxRequiredApprovals)
	}
	if len(r.Messages) > 0 {
		t := loop.Transcript{Messages: r.Messages}
		if err := t.Validate(); err != nil {
			return runs.Errorf(runs.EInvalid, "messages: %v", err)
		}
		if r.Messages[len(r.Messages)-1].Role != loop.RoleUser {
			return runs.Errorf(runs.EInvalid, "messages must end with a user message")
		}
		if err := loop.CheckToolPairing(t); err != nil {
			return runs.Errorf(runs.EInvalid, "messages: %v", err)
		}
	}
	if len(r.Approvers) == 0 {
		return runs.Errorf(runs.EInvalid, "approvers: at least one approver is required")
	}
	seen := map[string]bool{}
	for i, a := range r.Approvers {
		if err := validPrincipal(a); err != nil {
			return runs.Errorf(runs.EInvalid, "approvers[%d]: %v", i, err)
		}
		if seen[a] {
			return runs.Errorf(runs.EInvalid, "approvers[%d]: %q is listed twice", i, a)
		}
		seen[a] = true
	}
	if r.ApprovalTTLSeconds != 0 {
		// Compare in seconds: converting first would overflow (18446744134 s
		// is 60 s as a time.Duration).
		if s := r.ApprovalTTLSeconds; s < int64(MinApprovalTTL/time.Second) || s > int64(MaxApprovalTTL/time.Second) {
			return runs.Errorf(runs.EInvalid, "approval_ttl_seconds must be between %d and %d", int(MinApprovalTTL.Seconds()), int(MaxApprovalTTL.Seconds()))
		}
	}
	tools, err := r.validateClientTools(tools)
	if err != nil {
		return err
	}
	for i, name := range r.AllowedTools {
		if _, ok := tools.Lookup(name); !ok {
			return runs.Errorf(runs.EInvalid, "allowed_tools[%d]: %s (have %s)", i, tools.Missing(name), strings.Join(tools.Names(), ", "))
		}
		// Refused, as an approver or an event type listed twice is, rather
		// than stored twice: a caller who repeats a name most likely meant
		// another.
		if slices.Contains(r.AllowedTools[:i], name) {
			return runs.Errorf(runs.EInvalid, "allowed_tools[%d]: %q is listed twice", i, name)
		}
	}
	if err := r.checkRequireApproval(tools); err != nil {
		return err
	}
	switch {
	case r.MaxIterations < 0 || r.MaxIterations > 200:
		return runs.Errorf(runs.EInvalid, "max_iterations must be between 0 and 200")
	case r.MaxTokens < 0:
		return runs.Errorf(runs.EInvalid, "max_tokens must not be negative")
	case r.MaxOutputTokens < 0 || r.MaxOutputTokens > 200_000:
		return runs.Errorf(runs.EInvalid, "max_output_tokens must be between 0 and 200000")
	case len(r.Model) > 200:
		return runs.Errorf(runs.EInvalid, "model: at most 200 characters")
	case r.WebhookEvents != nil && len(r.WebhookEvents) == 0:
		return runs.Errorf(runs.EInvalid, "webhook_events is empty: name at least one event type, or leave it out for all of them")
	case strings.IndexFunc(r.WebhookURL, notInURI) >= 0:
		c := r.WebhookURL[strings.IndexFunc(r.WebhookURL, notInURI):]
		ch, _ := utf8.DecodeRuneInString(c)
		return runs.Errorf(runs.EInvalid, "webhook_url: %q is not a character of a URI: percent-encode it", ch)
	case r.WebhookURL == "" && len(r.WebhookEvents) > 0:
		return runs.Errorf(runs.EInvalid, "webhook_events needs webhook_url")
	case len(r.WebhookURL) > webhook.MaxURLLength:
		return runs.Errorf(runs.EInvalid, "webhook_url: at most %d bytes", webhook.MaxURLLength)
	case len(r.WebhookEvents) > len(webhook.AllEventTypes()):
		return runs.Errorf(runs.EInvalid, "webhook_events: at most %d entries", len(webhook.AllEventTypes()))
	}
	if _, err := webhook.ParseEventTypes(r.WebhookEvents); err != nil {
		return runs.Errorf(runs.EInvalid, "webhook_events: %v", err)
	}
	// A type listed twice is refused, as an approver is, rather than
	// stored once: what is stored is what the body said.
	for i, e := range r.WebhookEvents {
		if slices.Contains(r.WebhookEvents[:i], e) {
			return runs.Errorf(runs.EInvalid, "webhook_events[%d]: %q is listed twice", i, e)
		}
	}
	return nil
}

// checkRequireApproval refuses a require_approval pattern that matches
// none of the run's tools (the deployment's and its client tools; with
// allowed_tools, those and its client tools), nor could match a tool of
// one of its MCP servers (present or absent at start-up; not with
// allowed_tools, which names every tool the model is offered): it tightens
// nothing, and is most likely a typo the caller counts on (names are
// case-sensitive). A pattern that does not parse is left to the policy's
// check, which names what is wrong with it.
func (r *StartRequest) checkRequireApproval(tools *loop.Toolbox) error {
	names := tools.Names()
	// A server's tools are <server>__<tool>: a pattern that could match a
	// tool of a server this process has listed, or could not list, is
	// kept (a server may add a tool that a later process lists).
	servers := tools.AbsentPrefixes()
	for _, n := range names {
		if i := strings.Index(n, "__"); i > 0 && !slices.Contains(servers, n[:i+2]) {
			servers = append(servers, n[:i+2])
		}
	}
	if len(r.AllowedTools) > 0 {
		// The model is offered these and the run's client tools only.
		names, servers = append(slices.Clone(r.AllowedTools), tools.ClientNames()...), nil
	}
	for i, s := range r.RequireApproval {
		p, err := toolpattern.Parse(s)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(names, p.Match) || slices.ContainsFunc(servers, p.MayMatchUnder) {
			continue
		}
		return runs.Errorf(runs.EInvalid, "require_approval[%d]: %q matches none of this run's tools, so it would tighten nothing (tool names are case-sensitive; have %s)", i, s, strings.Join(names, ", "))
	}
	return nil
}

// notInURI reports whether c may not appear in a URI as it is (RFC 3986:
// controls, space, non-ASCII and "<>\"{}|\\^`" must be percent-encoded).
func notInURI(c rune) bool {
	return c <= ' ' || c >= 0x7f || strings.ContainsRune("<>\"{}|\\^`", c)
}

// WantsFourEyes reports whether the run asks for four-eyes.
func (r *StartRequest) WantsFourEyes() bool { return r.FourEyes != nil && *r.FourEyes }

// RunRequirements returns what the run asks for on top of the deployment
// policy (policy.Policy.CheckRun refuses a loosening).
func (r *StartRequest) RunRequirements() policy.RunRequirements {
	return policy.RunRequirements{RequireApproval: r.RequireApproval, RequiredApprovals: r.RequiredApprovals, FourEyes: r.FourEyes}
}

// Subscription returns the run's webhook subscription (nil: none), with
// the event types in canonical order.
func (r *StartRequest) Subscription() *runs.Subscription {
	if r.WebhookURL == "" {
		return nil
	}
	types, _ := webhook.ParseEventTypes(r.WebhookEvents)
	sub := &runs.Subscription{URL: r.WebhookURL}
	for _, t := range types {
		sub.Events = append(sub.Events, string(t))
	}
	return sub
}

// validPrincipal accepts an e-mail address (one plain addr-spec, see
// approval.CheckAddress) or a principal name (IAM ARN or local user) without
// spaces, control, separator or format characters.
func validPrincipal(p string) error {
	if IsEmail(p) {
		return approval.CheckAddress(p)
	}
	if p == "" || len(p) > 320 {
		return fmt.Errorf("must be 1 to 320 characters")
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%q is not valid UTF-8", p)
	}
	for _, c := range p {
		if c <= ' ' || unicode.IsControl(c) || unicode.In(c, unicode.Z, unicode.Cf) {
			return fmt.Errorf("%q contains spaces, control, separator or format characters", p)
		}
	}
	return nil
}

// ApprovalTTL returns the request's approval window or def.
func (r *StartRequest) ApprovalTTL(def time.Duration) time.Duration {
	if r.ApprovalTTLSeconds > 0 && r.ApprovalTTLSeconds <= int64(MaxApprovalTTL/time.Second) {
		return time.Duration(r.ApprovalTTLSeconds) * time.Second
	}
	return def
}

// LoopRequest turns the start request into the loop's request.
func (r *StartRequest) LoopRequest(runID string) loop.Request {
	msgs := r.Messages
	if r.Prompt != "" {
		msgs = []loop.Message{loop.UserText(r.Prompt)}
	}
	return loop.Request{
		RunID:      runID,
		Transcript: loop.Transcript{System: r.System, Messages: msgs},
		Options: loop.Options{
			Model:           r.Model,
			MaxIterations:   r.MaxIterations,
			MaxTokens:       r.MaxTokens,
			MaxOutputTokens: r.MaxOutputTokens,
			AllowedTools:    r.AllowedTools,
			DenialEndsRun:   r.DenialEndsRun,
		},
	}
}

// Purpose is a short, human-readable summary of what the run is for, for
// approval mails and pages.
func (r *StartRequest) Purpose() string {
	text := r.Prompt
	if text == "" && len(r.Messages) > 0 {
		text = r.Messages[len(r.Messages)-1].Text()
	}
	return shortPurpose(text)
}

// MaxPurposeChars bounds a purpose: at most this many characters (the
// spec's 300), the last one "…" when the text was cut.
const MaxPurposeChars = 300

// shortPurpose returns text when it has at most MaxPurposeChars characters,
// else its first MaxPurposeChars-1 characters and "…"; either way at most
// runs.MaxPurposeBytes bytes (300 characters of four bytes would not fit).
func shortPurpose(text string) string {
	if utf8.RuneCountInString(text) <= MaxPurposeChars && len(text) <= runs.MaxPurposeBytes {
		return text
	}
	const ellipsis = "…"
	cut := 0
	for n := 0; n < MaxPurposeChars-1 && cut < len(text); n++ {
		_, w := utf8.DecodeRuneInString(text[cut:])
		if cut+w > runs.MaxPurposeBytes-len(ellipsis) {
			break
		}
		cut += w
	}
	return text[:cut] + ellipsis
}

// IsEmail reports whether an approver entry is an e-mail address.
func IsEmail(approver string) bool {
	return strings.Contains(approver, "@") && !strings.HasPrefix(approver, "arn:")
}
