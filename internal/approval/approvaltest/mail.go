package approvaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
)

// SentMessage is a mail an emulator accepted, as SentMail reads it back.
type SentMessage struct {
	// ID is the emulator's message id.
	ID string
	// From is the sender address.
	From string
	// To lists every destination (To, Cc and Bcc).
	To []string
	// Subject is the decoded subject.
	Subject string
	// Text and HTML are the plain-text and HTML bodies. For simple content
	// with both bodies moto keeps only the HTML one, LocalStack both; for
	// raw mails both are taken from the MIME parts.
	Text string
	HTML string
	// Raw is the MIME source of a raw mail, empty for simple content.
	Raw string
}

// Body returns the HTML and the text body, joined by a newline, for
// searching.
func (m SentMessage) Body() string {
	return strings.TrimSpace(m.HTML + "\n" + m.Text)
}

// The emulators' read-back endpoints.
const (
	// motoData is moto's dump of its whole state.
	motoData = "/moto-api/data.json"
	// localStackSES lists the mails LocalStack's SES accepted. LocalStack
	// registers it when SES first loads (its first SES call; the init of
	// localstack/docker-compose.yml makes one).
	localStackSES = "/_aws/ses"
	// localStackHealth is LocalStack's health, with its services' states.
	localStackHealth = "/_localstack/health"
)

// motoSES is the "ses" section of moto's /moto-api/data.json, which holds
// the mails of SES v1 and v2 of all accounts and regions:
//
//	{"ses": {"Message": [{"id", "source", "subject", "body",
//	                      "destinations": {"ToAddresses": [...], ...}}],
//	         "RawMessage": [{"id", "source", "destinations": [...], "raw_data"}]}}
type motoSES struct {
	SES struct {
		Message []struct {
			ID           string              `json:"id"`
			Source       string              `json:"source"`
			Subject      string              `json:"subject"`
			Body         string              `json:"body"`
			Destinations map[string][]string `json:"destinations"`
		} `json:"Message"`
		RawMessage []struct {
			ID           string   `json:"id"`
			Source       string   `json:"source"`
			Destinations []string `json:"destinations"`
			RawData      string   `json:"raw_data"`
		} `json:"RawMessage"`
	} `json:"ses"`
}

// localStackMail is LocalStack's GET /_aws/ses (its SES provider's
// SentEmail records, oldest first, of all regions):
//
//	{"messages": [{"Id", "Region", "Source", "Subject", "Timestamp",
//	               "Destination": {"ToAddresses": [...], "CcAddresses": [...], "BccAddresses": [...]},
//	               "Body": {"text_part": ..., "html_part": ...}},
//	              {"Id", "Region", "Source", "RawData", "Timestamp"}]}
//
// A raw mail carries a Destination only in some versions, as the list of
// addresses given to SendRawEmail.
type localStackMail struct {
	Messages []struct {
		ID          string          `json:"Id"`
		Source      string          `json:"Source"`
		Subject     string          `json:"Subject"`
		Destination json.RawMessage `json:"Destination"`
		Body        *struct {
			Text *string `json:"text_part"`
			HTML *string `json:"html_part"`
		} `json:"Body"`
		RawData string `json:"RawData"`
	} `json:"messages"`
}

// SentMail returns the mails the emulator at endpoint (for example
// http://localhost:4566) has accepted through SES (v1 or v2), oldest first.
// It is a helper for integration tests. It reads moto's GET
// /moto-api/data.json and, when that is not found, LocalStack's GET
// /_aws/ses.
//
// moto 5.2 answers data.json with a 500 once for every S3 object whose
// bucket was deleted (it looks the bucket up while serializing the object's
// restore status, and the next read moves past it), so SentMail retries on
// 5xx answers, up to readAttempts times or until ctx is done.
func SentMail(ctx context.Context, endpoint string) ([]SentMessage, error) {
	base := strings.TrimRight(endpoint, "/")
	var moto motoSES
	err := getJSON(ctx, base+motoData, &moto)
	if err == nil {
		return fromMoto(moto)
	}
	if !errors.Is(err, errNotFound) {
		return nil, fmt.Errorf("read sent mail: %w", err)
	}
	var ls localStackMail
	switch err := getJSON(ctx, base+localStackSES, &ls); {
	case errors.Is(err, errNotFound):
		return nil, fmt.Errorf("read sent mail: neither moto's %s nor LocalStack's %s is found at %s "+
			"(LocalStack serves %s once SES has loaded, at its first SES call)", motoData, localStackSES, base, localStackSES)
	case err != nil:
		return nil, fmt.Errorf("read sent mail: %w", err)
	}
	return fromLocalStack(ls)
}

func fromMoto(data motoSES) ([]SentMessage, error) {
	var out []SentMessage
	for _, m := range data.SES.Message {
		s := SentMessage{ID: m.ID, From: m.Source, Subject: m.Subject}
		for _, kind := range []string{"ToAddresses", "CcAddresses", "BccAddresses"} {
			s.To = append(s.To, m.Destinations[kind]...)
		}
		if looksLikeHTML(m.Body) {
			s.HTML = m.Body
		} else {
			s.Text = m.Body
		}
		out = append(out, s)
	}
	for _, m := range data.SES.RawMessage {
		s := SentMessage{ID: m.ID, From: m.Source, Raw: m.RawData}
		for _, to := range m.Destinations {
			if !slices.Contains(s.To, to) {
				s.To = append(s.To, to)
			}
		}
		if err := parseRaw(&s); err != nil {
			return nil, fmt.Errorf("read sent mail %s: %w", m.ID, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func fromLocalStack(data localStackMail) ([]SentMessage, error) {
	var out []SentMessage
	for _, m := range data.Messages {
		s := SentMessage{ID: m.ID, From: m.Source, Subject: m.Subject, Raw: m.RawData}
		to, err := destinations(m.Destination)
		if err != nil {
			return nil, fmt.Errorf("read sent mail %s: destination: %w", m.ID, err)
		}
		for _, a := range to {
			if !slices.Contains(s.To, a) {
				s.To = append(s.To, a)
			}
		}
		switch {
		case m.RawData != "":
			if err := parseRaw(&s); err != nil {
				return nil, fmt.Errorf("read sent mail %s: %w", m.ID, err)
			}
		case m.Body != nil:
			if m.Body.Text != nil {
				s.Text = *m.Body.Text
			}
			if m.Body.HTML != nil {
				s.HTML = *m.Body.HTML
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// destinations reads a LocalStack Destination: SES's Destination object
// (To, Cc and Bcc, in that order) or a list of addresses; absent is none.
func destinations(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var d struct {
		To  []string `json:"ToAddresses"`
		Cc  []string `json:"CcAddresses"`
		Bcc []string `json:"BccAddresses"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	return slices.Concat(d.To, d.Cc, d.Bcc), nil
}

// ServesSESv2 reports whether the emulator at endpoint serves SES v2.
// LocalStack lists its services' states at GET /_localstack/health, sesv2
// only in a Pro image (an auth token) that loads it; an endpoint where
// that is not found is taken to be moto, which serves SES v1 and v2.
func ServesSESv2(ctx context.Context, endpoint string) (bool, error) {
	var health struct {
		Services map[string]string `json:"services"`
	}
	switch err := getJSON(ctx, strings.TrimRight(endpoint, "/")+localStackHealth, &health); {
	case errors.Is(err, errNotFound):
		return true, nil
	case err != nil:
		return false, err
	}
	switch health.Services["sesv2"] {
	case "available", "running":
		return true, nil
	}
	return false, nil
}

// readAttempts bounds how often getJSON reads an endpoint that answers 5xx.
const readAttempts = 50

// errNotFound is the error of a 404 answer.
var errNotFound = errors.New("not found")

// getJSON decodes the JSON answer of GET url into v, trying again after a
// 5xx answer; a 404 is errNotFound.
func getJSON(ctx context.Context, url string, v any) error {
	for attempt := 1; ; attempt++ {
		retry, err := getJSONOnce(ctx, url, v)
		if err == nil || !retry || attempt == readAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// getJSONOnce makes one GET; retry says a failure was a server error worth
// another try.
func getJSONOnce(ctx context.Context, url string, v any) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // drain for reuse; the status is the error
		if resp.StatusCode == http.StatusNotFound {
			return false, fmt.Errorf("GET %s: %w", url, errNotFound)
		}
		return resp.StatusCode >= 500, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return false, fmt.Errorf("decode %s: %w", url, err)
	}
	return false, nil
}

// ExtractLink finds the first approval link under baseURL in body: baseURL
// (trailing slashes dropped), "/approvals/" and a well-formed token.
func ExtractLink(body, baseURL string) (string, bool) {
	prefix := strings.TrimRight(baseURL, "/") + "/approvals/"
	for rest := body; ; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			return "", false
		}
		rest = rest[i+len(prefix):]
		n := 0
		for n < len(rest) && base64URLChar(rest[n]) {
			n++
		}
		if approval.WellFormed(rest[:n]) {
			return prefix + rest[:n], true
		}
	}
}

// base64URLChar reports whether c may appear in a token (the base64url
// alphabet); approval.WellFormed then checks the whole token.
func base64URLChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// ParseEML reads a mail in RFC 5322 form, as OutboxMailer writes it, into a
// SentMessage (From and To from its headers).
func ParseEML(raw string) (SentMessage, error) {
	s := SentMessage{Raw: raw}
	if err := parseRaw(&s); err != nil {
		return SentMessage{}, err
	}
	return s, nil
}

// parseRaw fills Subject, Text, HTML (and From and To when empty) from s.Raw.
func parseRaw(s *SentMessage) error {
	msg, err := mail.ReadMessage(strings.NewReader(s.Raw))
	if err != nil {
		return fmt.Errorf("parse mail: %w", err)
	}
	dec := new(mime.WordDecoder)
	if s.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return fmt.Errorf("parse mail subject: %w", err)
	}
	if s.From == "" {
		if a, err := mail.ParseAddress(msg.Header.Get("From")); err == nil {
			s.From = a.Address
		}
	}
	if len(s.To) == 0 {
		if list, err := msg.Header.AddressList("To"); err == nil {
			for _, a := range list {
				s.To = append(s.To, a.Address)
			}
		}
	}
	return readBody(s, msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
}

func readBody(s *SentMessage, contentType, encoding string, body io.Reader) error {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mediaType = "text/plain"
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextPart() // decodes quoted-printable parts
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("parse mail part: %w", err)
			}
			if err := readBody(s, p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); err != nil {
				return err
			}
		}
	}
	if strings.EqualFold(encoding, "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("read mail body: %w", err)
	}
	switch mediaType {
	case "text/html":
		s.HTML += string(b)
	case "text/plain":
		s.Text += string(b)
	}
	return nil
}

// looksLikeHTML tells an HTML body from a text one in moto's single body
// field.
func looksLikeHTML(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "<")
}
