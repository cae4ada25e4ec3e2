package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// IdempotencyKeyHeader is the header of POST /runs that names a start, so
// that the same request sent again gets the run the first one created.
const IdempotencyKeyHeader = "Idempotency-Key"

// startAttempts is how often StartRun sends its request at most.
const startAttempts = 4

// maxRetryAfter is the longest Retry-After StartRun and Wait wait out
// before they send a request again; an answer that asks for longer is
// returned.
const maxRetryAfter = time.Minute

// retryAfterPause is the pause before a request that failed with err is
// sent again, the back-off's pause being backoff: no shorter than the
// answer's Retry-After, if it has one. ok is false when the answer asks
// for more than maxRetryAfter or for longer than ctx has left: then err
// is the caller's to read (Error.RetryAfter), not to be retried in vain.
func retryAfterPause(ctx context.Context, err error, backoff time.Duration) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) || e.RetryAfter <= 0 {
		return backoff, true
	}
	if e.RetryAfter > maxRetryAfter {
		return 0, false
	}
	if end, ok := ctx.Deadline(); ok && time.Until(end) < e.RetryAfter {
		return 0, false
	}
	return max(backoff, e.RetryAfter), true
}

// StartOption configures one StartRun call.
type StartOption func(*startSettings)

type startSettings struct {
	key      string
	keyGiven bool
}

// maxIdempotencyKeyBytes is the longest Idempotency-Key the API takes.
const maxIdempotencyKeyBytes = 255

// checkIdempotencyKey refuses a key the API would refuse (400), before any
// request: 1 to 255 visible ASCII characters, '!' to '~'. The error does
// not repeat the key.
func checkIdempotencyKey(key string) error {
	if key == "" || len(key) > maxIdempotencyKeyBytes {
		return fmt.Errorf("agentgate client: the idempotency key has %d bytes: want 1 to %d visible ASCII characters, such as a UUID", len(key), maxIdempotencyKeyBytes)
	}
	for i := range len(key) {
		if key[i] < '!' || key[i] > '~' {
			return fmt.Errorf("agentgate client: the idempotency key has byte 0x%02x at %d: want 1 to %d visible ASCII characters ('!' to '~', no spaces), such as a UUID", key[i], i, maxIdempotencyKeyBytes)
		}
	}
	return nil
}

// WithIdempotencyKey starts the run under key (the Idempotency-Key header:
// 1 to 255 visible ASCII characters, such as a UUID; see the README's
// "Starting a run at most once"). StartRun called again with the same key
// and the same request, by this process or another with the same
// credentials, gets the run the first call created, as it is now, for as
// long as the server keeps that run; with another request it is refused
// (422). Use a new key for each new run. Without it StartRun makes a
// random key for its own retries, which protects them but not a caller
// that calls StartRun again. A key the API would refuse (empty, too long,
// a space, a control or non-ASCII character) makes StartRun fail before
// any request, never fall back to a random key.
func WithIdempotencyKey(key string) StartOption {
	return func(s *startSettings) { s.key, s.keyGiven = key, true }
}

// NewIdempotencyKey returns a random key for WithIdempotencyKey (a
// version 4 UUID). Keep it with the work the run is for, so that a retry
// after a crash sends the same key.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// StartRun starts a run (POST /runs). The answer comes at once, with the
// run QUEUED; use Wait to follow it.
//
// Every start is sent under an idempotency key (WithIdempotencyKey's, else
// a random one), so StartRun retries what may have reached the server
// without risking a second run: an unreachable server or a lost answer,
// throttling (429), a server error (5xx) and a conflict with a concurrent
// start under the same key (409), up to 4 attempts, the pause doubling
// from the poll interval (WithPollInterval), while ctx lasts. An answer
// that says when to come back (Retry-After) is not sent again before then;
// one that asks for more than a minute, or for longer than ctx has left,
// is returned at once (Error.RetryAfter). An answer to a retry may be the
// run as the first attempt created it and the worker has moved it on
// since.
func (c *Client) StartRun(ctx context.Context, req StartRunRequest, opts ...StartOption) (*Run, error) {
	var set startSettings
	for _, o := range opts {
		o(&set)
	}
	switch {
	case set.keyGiven:
		// A caller's key that came back empty from its store must not
		// become a random one: that would lose at-most-once silently.
		if err := checkIdempotencyKey(set.key); err != nil {
			return nil, err
		}
	default:
		set.key = NewIdempotencyKey()
	}
	// Go's nil slice encodes as null, which the API refuses as a wrong
	// type; sent empty, a missing approver or block gets the API's own
	// answer ("at least one approver").
	if req.Approvers == nil {
		req.Approvers = []string{}
	}
	if req.Messages != nil {
		req.Messages = slices.Clone(req.Messages)
		for i := range req.Messages {
			if req.Messages[i].Content == nil {
				req.Messages[i].Content = []Block{}
			}
		}
	}
	body := startRunBody{StartRunRequest: req}
	if req.AllowedTools != nil {
		body.AllowedTools = &req.AllowedTools
	}
	if req.WebhookEvents != nil {
		body.WebhookEvents = &req.WebhookEvents
	}
	// Encoded once: every attempt sends the same bytes.
	encoded, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	header := http.Header{IdempotencyKeyHeader: {set.key}}
	delay := c.pollMin
	for attempt := 1; ; attempt++ {
		var r Run
		err := c.doWith(ctx, "POST", "/runs", header, json.RawMessage(encoded), &r)
		if err == nil {
			return &r, nil
		}
		if attempt == startAttempts || ctx.Err() != nil || !startRetryable(err) {
			return nil, err
		}
		// The server may have said when to come back: not before then,
		// and not at all when that is past ctx's end or StartRun's
		// patience (the caller reads Error.RetryAfter).
		pause, ok := retryAfterPause(ctx, err, delay/2+rand.N(delay/2+1)) //nolint:gosec // jitter of a retry delay, not a secret
		if !ok {
			return nil, err
		}
		if c.wait(ctx, pause) != nil {
			return nil, err
		}
		delay = min(delay*2, c.pollMax)
	}
}

// wait pauses d, or until ctx ends (its error).
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.pause != nil {
		return c.pause(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// startRetryable reports whether a start that failed with err, while its
// ctx lives, may be sent again under its idempotency key: throttling, a
// server error, a conflict with another request under the key that was
// still being written, and every failure to get an answer (an unreachable
// server, a dropped connection, the HTTP client's own timeout, which
// wraps context.DeadlineExceeded though ctx has not ended: the very case
// of a start whose run may exist).
func startRetryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode == http.StatusConflict || e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
	}
	return true
}

// startRunBody is the body StartRun sends: req, with the lists whose
// absence means "all" sent whenever they are not nil. omitempty would drop
// an empty one, so a caller who allowed no tool would get every tool; sent
// empty, it gets the API's 422 instead. (These fields, being shallower,
// replace the embedded ones of the same JSON name.)
type startRunBody struct {
	StartRunRequest
	AllowedTools  *[]string `json:"allowed_tools,omitempty"`
	WebhookEvents *[]string `json:"webhook_events,omitempty"`
}

// Run returns a run (GET /runs/{id}).
func (c *Client) Run(ctx context.Context, id string) (*Run, error) {
	var r Run
	if err := c.do(ctx, "GET", "/runs/"+url.PathEscape(id), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// IfNoneMatchHeader is the request header of GET /runs/{id} naming the
// run the caller has (its ETag): the answer is 304 Not Modified, without
// the run, while the run is unchanged.
const IfNoneMatchHeader = "If-None-Match"

// runIfChanged reads a run at path (GET /runs/{id}, with or without
// after_version and wait) and returns it with its entity tag (the
// answer's ETag; "" from a server that sends none). With have, the run
// read before, and its tag, it asks conditionally (If-None-Match): a 304
// Not Modified answer returns have as it is, neither downloaded nor
// decoded again.
func (c *Client) runIfChanged(ctx context.Context, path string, have *Run, tag string) (*Run, string, error) {
	var header http.Header
	if have != nil && tag != "" {
		header = http.Header{IfNoneMatchHeader: {tag}}
	}
	var r Run
	status, h, err := c.exchange(ctx, "GET", path, header, nil, &r)
	if err != nil {
		return nil, "", err
	}
	if status == http.StatusNotModified {
		return have, tag, nil
	}
	return &r, h.Get("ETag"), nil
}

// EventsPage returns one page of a run's events with Seq > after (limit
// 1 to 1000; 0: the server's default).
func (c *Client) EventsPage(ctx context.Context, id string, after int64, limit int) (*EventPage, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/runs/" + url.PathEscape(id) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.eventsAt(ctx, path)
}

func (c *Client) eventsAt(ctx context.Context, path string) (*EventPage, error) {
	var p EventPage
	if err := c.do(ctx, "GET", path, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Events iterates over a run's events with Seq > after, in order,
// following the pages; it stops at the first error, which it yields.
func (c *Client) Events(ctx context.Context, id string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		p, err := c.EventsPage(ctx, id, after, c.pageSizeUpTo(MaxEventsPageSize))
		for {
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, ev := range p.Events {
				if !yield(ev, nil) {
					return
				}
			}
			if p.Next == "" || len(p.Events) == 0 {
				return
			}
			p, err = c.eventsAt(ctx, p.Next)
		}
	}
}

// Decide decides the held turn (POST /runs/{id}/decision). The decision's
// TurnDigest must be the one the decider reviewed: a run that moved on
// answers an *Error with code conflict.
func (c *Client) Decide(ctx context.Context, id string, d Decision) (*Run, error) {
	var r Run
	if err := c.do(ctx, "POST", "/runs/"+url.PathEscape(id)+"/decision", d, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Cancel cancels a run (POST /runs/{id}/cancel).
func (c *Client) Cancel(ctx context.Context, id string) (*Run, error) {
	var r Run
	if err := c.do(ctx, "POST", "/runs/"+url.PathEscape(id)+"/cancel", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ClientCallInput returns the whole final input of a handed-over client
// call of run id: call.Input when the run showed it whole, else every page
// of GET /runs/{id}/calls/{call_id}?part=input (a long input is shortened
// in Run.ToolResults, ClientCall.InputTruncated).
func (c *Client) ClientCallInput(ctx context.Context, id string, call ClientCall) (json.RawMessage, error) {
	if !call.InputTruncated {
		return call.Input, nil
	}
	text, err := c.HeldCallText(ctx, id, call.ID, "input")
	if err != nil {
		return nil, err
	}
	if !json.Valid([]byte(text)) {
		return nil, fmt.Errorf("client call %s: the input read is not JSON", call.ID)
	}
	return json.RawMessage(text), nil
}

// SubmitToolResults submits the results of a run's handed-over client-tool
// calls (POST /runs/{id}/tool-results): exactly one per call of
// Run.ToolResults, for its ToolResultsID. A call's whole input is
// ClientCallInput. It returns the run (RESUMING);
// of concurrent submissions exactly one wins, the others get a 409 Error.
// Only the initiator or a tool executor of the run (named, or a current
// member of a group it names) may submit (403).
func (c *Client) SubmitToolResults(ctx context.Context, id string, res ToolResults) (*Run, error) {
	if res.Results == nil {
		res.Results = []ToolResult{} // not null (see StartRun)
	}
	var r Run
	if err := c.do(ctx, "POST", "/runs/"+url.PathEscape(id)+"/tool-results", res, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// PendingApprovalsPage returns one page of the caller's approval inbox
// (GET /approvals): the runs waiting for the caller's decision, newest
// suspension first.
// cursor is the previous page's NextCursor ("" for the first); limit 0 is
// the server's default.
func (c *Client) PendingApprovalsPage(ctx context.Context, cursor string, limit int) (*ApprovalPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/approvals"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p ApprovalPage
	if err := c.do(ctx, "GET", path, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// PendingApprovals iterates over the caller's approval inbox, newest
// first, following the pages; it stops at the first error, which it
// yields.
func (c *Client) PendingApprovals(ctx context.Context) iter.Seq2[PendingApproval, error] {
	return func(yield func(PendingApproval, error) bool) {
		cursor := ""
		for {
			p, err := c.PendingApprovalsPage(ctx, cursor, c.pageSizeUpTo(MaxApprovalsPageSize))
			if err != nil {
				yield(PendingApproval{}, err)
				return
			}
			for _, a := range p.Approvals {
				if !yield(a, nil) {
					return
				}
			}
			if p.NextCursor == "" || len(p.Approvals) == 0 {
				return
			}
			cursor = p.NextCursor
		}
	}
}

// ErrRunEnded is returned (wrapped) by Wait when the run ended in a status
// it was not waiting for.
var ErrRunEnded = errors.New("the run ended")

// Wait waits for a run's status to be one of statuses (any terminal
// status when none is given) and returns the run. It polls, backing off
// from the client's minimum to its maximum interval (WithPollInterval),
// with jitter. Each request after the first names the run it has
// (If-None-Match with the last answer's ETag), so an unchanged run is
// answered 304 Not Modified and not downloaded or decoded again. With
// WithServerWait it asks the server instead to answer
// only when the run has changed (GET /runs/{id}?after_version=N&wait=S),
// so a change is seen at once, and asks again at once after a change or a
// wait held to its end; an answer that brings no change and came before
// the wait was over (the deployed API, which does not hold requests, a
// server from before the parameter, or one that is stopping) is followed
// by the back-off, as when polling, so such a server is never asked in a
// tight loop. A run that
// ends in another status returns the run and an error wrapping
// ErrRunEnded; throttling (429), server errors (5xx) and network errors are
// retried until ctx ends (WithWaitNotify hears of each), never sooner than
// an answer's Retry-After asks (one that asks for more than a minute, or
// for longer than ctx has left, ends the wait at once with that error,
// its Error.RetryAfter set); other API errors end the wait.
func (c *Client) Wait(ctx context.Context, id string, statuses ...Status) (*Run, error) {
	delay := c.pollMin
	var (
		last *Run
		tag  string // last's ETag
	)
	path := "/runs/" + url.PathEscape(id)
	for {
		asked := c.serverWait > 0 && last != nil // the server is asked to hold
		at := path
		if asked {
			at += "?" + afterQuery(last.Version, c.serverWait)
		}
		start := time.Now()
		r, rTag, err := c.runIfChanged(ctx, at, last, tag)
		if c.waitNotify != nil && (err == nil || ctx.Err() == nil && retryable(err)) {
			c.waitNotify(err)
		}
		again := false // ask again at once
		switch {
		case err == nil:
			changed := last == nil || r.Version > last.Version
			last, tag = r, rTag
			if slices.Contains(statuses, r.Status) || len(statuses) == 0 && r.Status.Terminal() {
				return r, nil
			}
			if r.Status.Terminal() {
				return r, fmt.Errorf("run %s is %s (%s), not %v: %w", id, r.Status, r.TerminationReason, statuses, ErrRunEnded)
			}
			// With WithServerWait the next request waits for the next
			// change, at once after a change or a wait held to its end; an
			// early answer without a change (a server that does not hold,
			// or one that stopped) is followed by the back-off.
			again = c.serverWait > 0 && (!asked || changed || time.Since(start) >= c.serverWait-time.Second)
		case ctx.Err() != nil:
			return last, waitEnded(ctx, id, last, err)
		case !retryable(err):
			return nil, err
		}
		if again {
			continue
		}
		// Jitter over the upper half keeps concurrent waiters apart; an
		// answer's Retry-After comes first.
		pause, ok := retryAfterPause(ctx, err, delay/2+rand.N(delay/2+1)) //nolint:gosec // jitter of a poll delay, not a secret
		if !ok {
			return last, fmt.Errorf("wait for run %s: the server asks to be asked again in %s, longer than Wait waits for it or than its context has left: %w", id, retryAfterOf(err), err)
		}
		if c.wait(ctx, pause) != nil {
			return last, waitEnded(ctx, id, last, err)
		}
		delay = min(delay*3/2, c.pollMax)
	}
}

// retryAfterOf is the Retry-After of err's answer (0: none).
func retryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// afterQuery is the query of a GET /runs/{id} that the server holds until
// the run's version is above after (or it has ended), at most wait.
func afterQuery(after int64, wait time.Duration) string {
	q := url.Values{}
	q.Set("after_version", strconv.FormatInt(after, 10))
	q.Set("wait", strconv.FormatInt(int64(wait/time.Second), 10))
	return q.Encode()
}

// waitEnded is Wait's error when ctx ends: it wraps ctx.Err() and says
// where the run stood.
func waitEnded(ctx context.Context, id string, last *Run, lastErr error) error {
	switch {
	case last != nil && lastErr != nil:
		return fmt.Errorf("wait for run %s: %w (status %s when last read; last error: %w)", id, ctx.Err(), last.Status, lastErr)
	case last != nil:
		return fmt.Errorf("wait for run %s: %w (status %s)", id, ctx.Err(), last.Status)
	case lastErr != nil:
		return fmt.Errorf("wait for run %s: %w (last error: %w)", id, ctx.Err(), lastErr)
	}
	return fmt.Errorf("wait for run %s: %w", id, ctx.Err())
}

func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode == 429 || e.StatusCode >= 500
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// HeldCallTextPage returns one page of the whole preview (part "preview")
// or input (part "input") of a pending call of a waiting run (GET
// /runs/{id}/calls/{call_id}), from offset (0 or a NextOffset).
func (c *Client) HeldCallTextPage(ctx context.Context, id, callID, part string, offset int) (*HeldCallText, error) {
	q := url.Values{"part": {part}}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	var p HeldCallText
	if err := c.do(ctx, "GET", "/runs/"+url.PathEscape(id)+"/calls/"+url.PathEscape(callID)+"?"+q.Encode(), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// HeldCallText returns the whole preview (part "preview") or input (part
// "input") of a pending call, or the input of a handed-over client call,
// following the pages: every byte the approver is asked to approve (or the
// caller to execute), where Run's PendingCall (ClientCall) may show it
// shortened (PreviewTruncated, InputTruncated).
func (c *Client) HeldCallText(ctx context.Context, id, callID, part string) (string, error) {
	var b []byte
	offset := 0
	for {
		p, err := c.HeldCallTextPage(ctx, id, callID, part, offset)
		if err != nil {
			return "", err
		}
		if p.Offset != offset {
			return "", fmt.Errorf("held call %s: asked for offset %d, got %d", callID, offset, p.Offset)
		}
		b = append(b, p.Text...)
		if p.NextOffset == nil {
			if len(b) != p.Size {
				return "", fmt.Errorf("held call %s: read %d bytes of %d", callID, len(b), p.Size)
			}
			return string(b), nil
		}
		if *p.NextOffset <= offset {
			return "", fmt.Errorf("held call %s: next offset %d does not move past %d", callID, *p.NextOffset, offset)
		}
		offset = *p.NextOffset
	}
}
