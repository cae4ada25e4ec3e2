package approval

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/awscall"
)

// Mailer delivers approval mails. Send returns an error when the mail could
// not be handed over; the error never contains the link.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

var (
	_ Mailer = (*SESMailer)(nil)
	_ Mailer = (*OutboxMailer)(nil)
)

// SESCaller sends one signed SES call; *awscall.Client of the SESAPI's
// Service is the one the functions use.
type SESCaller interface {
	Do(ctx context.Context, r awscall.Request) (*awscall.Response, error)
}

// SESAPI is the SES API SESMailer sends through (AGENTGATE_SES_API).
type SESAPI string

const (
	// SESv2 is SES v2's SendEmail (POST /v2/email/outbound-emails, a JSON
	// body), the default.
	SESv2 SESAPI = "v2"
	// SESv1 is SendEmail of SES's first API (2010-12-01, the Query
	// protocol: a form posted to /), for an emulator that serves only that
	// one: LocalStack Community has SES but not SES v2. Both are the IAM
	// action ses:SendEmail on the sender's identity.
	SESv1 SESAPI = "v1"
)

// DefaultSESAPI is the SES API when AGENTGATE_SES_API is unset.
const DefaultSESAPI = SESv2

// ParseSESAPI reads a value of AGENTGATE_SES_API: "v1" or "v2" (any case,
// surrounding spaces ignored); empty is DefaultSESAPI.
func ParseSESAPI(s string) (SESAPI, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return DefaultSESAPI, nil
	case string(SESv2):
		return SESv2, nil
	case string(SESv1):
		return SESv1, nil
	}
	return "", fmt.Errorf("%q: want v2 (SES v2, the default) or v1 (SES's first API, e.g. for LocalStack Community, which has no SES v2)", s)
}

// Service is the awscall service api is reached and signed as.
func (api SESAPI) Service() awscall.Service {
	if api == SESv1 {
		return awscall.SES
	}
	return awscall.SESv2
}

// SESMailer sends approval mails through Amazon SES as simple content with
// a text and an HTML body: SES v2's SendEmail (POST
// /v2/email/outbound-emails) or, with SESv1, SendEmail of SES's first API
// (a form posted to /). Each is the request the SDK's client sends (tests
// compare them), made through awscall rather than the SDK's client, which
// would cost every function 0.56 MB.
type SESMailer struct {
	client SESCaller
	from   string
	api    SESAPI
}

// NewSESMailer returns a mailer sending from the address from (for example
// AGENTGATE_MAIL_FROM) through api (empty: SESv2) with client, a caller of
// api.Service() that the caller builds once.
func NewSESMailer(client SESCaller, from string, api SESAPI) *SESMailer {
	if api == "" {
		api = DefaultSESAPI
	}
	return &SESMailer{client: client, from: from, api: api}
}

// Send composes m and sends it to m.Approver. An error never contains the
// link's token, even where the service's message repeats the request.
func (s *SESMailer) Send(ctx context.Context, m Message) error {
	subject, text, html, err := Compose(m)
	if err != nil {
		return err
	}
	var r awscall.Request
	if s.api == SESv1 {
		r = s.sendEmailV1(m.Approver, subject, text, html)
	} else if r, err = s.sendEmailV2(m.Approver, subject, text, html); err != nil {
		return fmt.Errorf("send approval mail for run %s: %w", m.RunID, err)
	}
	if _, err := s.client.Do(ctx, r); err != nil {
		return sendError(m, err)
	}
	return nil
}

// sendEmailV2 is SES v2's SendEmail of a simple mail.
func (s *SESMailer) sendEmailV2(to, subject, text, html string) (awscall.Request, error) {
	body, err := json.Marshal(sendEmail{
		FromEmailAddress: s.from,
		Destination:      sesDestination{ToAddresses: []string{to}},
		Content: sesContent{Simple: sesMessage{
			Subject: sesText{Data: subject, Charset: sesCharset},
			Body:    sesBody{Text: sesText{Data: text, Charset: sesCharset}, HTML: sesText{Data: html, Charset: sesCharset}},
		}},
	})
	if err != nil {
		return awscall.Request{}, err
	}
	return awscall.Request{Method: http.MethodPost, Path: "/v2/email/outbound-emails",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, nil
}

// sendEmailV1 is SendEmail of SES's first API: the members SESMailer sets,
// flattened as the Query protocol does (lists as .member.N).
func (s *SESMailer) sendEmailV1(to, subject, text, html string) awscall.Request {
	form := url.Values{
		"Action":                           {"SendEmail"},
		"Version":                          {"2010-12-01"},
		"Source":                           {s.from},
		"Destination.ToAddresses.member.1": {to},
		"Message.Subject.Data":             {subject},
		"Message.Subject.Charset":          {sesCharset},
		"Message.Body.Text.Data":           {text},
		"Message.Body.Text.Charset":        {sesCharset},
		"Message.Body.Html.Data":           {html},
		"Message.Body.Html.Charset":        {sesCharset},
	}
	return awscall.Request{Method: http.MethodPost, Path: "/",
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(form.Encode())}
}

// sendError wraps the error of m's send. A service's message may repeat
// values of the request (the link is in the body): when err's text holds
// the link's token, the token is replaced and err is not wrapped, so no
// log line, whichever error of the chain it prints, shows the link.
func sendError(m Message, err error) error {
	token := m.Link[strings.LastIndexByte(m.Link, '/')+1:]
	if msg := err.Error(); token != "" && strings.Contains(msg, token) {
		return fmt.Errorf("send approval mail for run %s: ses: %s", m.RunID, strings.ReplaceAll(msg, token, "[token]"))
	}
	return fmt.Errorf("send approval mail for run %s: ses: %w", m.RunID, err)
}

// sesCharset is the charset of every part of a mail.
const sesCharset = "UTF-8"

// sendEmail is the body of SES v2's SendEmail with simple content (the
// SDK's SendEmailInput, the members SESMailer sets).
type sendEmail struct {
	FromEmailAddress string         `json:"FromEmailAddress"`
	Destination      sesDestination `json:"Destination"`
	Content          sesContent     `json:"Content"`
}

type sesDestination struct {
	ToAddresses []string `json:"ToAddresses"`
}

type sesContent struct {
	Simple sesMessage `json:"Simple"`
}

type sesMessage struct {
	Subject sesText `json:"Subject"`
	Body    sesBody `json:"Body"`
}

type sesBody struct {
	Text sesText `json:"Text"`
	HTML sesText `json:"Html"`
}

type sesText struct {
	Data    string `json:"Data"`
	Charset string `json:"Charset"`
}

// OutboxMailer writes each approval mail as an RFC 5322 .eml file
// (multipart/alternative, text and HTML) into a folder and prints the link
// to a writer. The local binary uses it in place of SES.
type OutboxMailer struct {
	dir  string
	from string
	out  io.Writer
	now  func() time.Time
}

// NewOutboxMailer returns a mailer writing into dir (created if missing),
// with from as the sender, printing "approval link for <approver>: <link>"
// lines to out (nil: print nothing).
func NewOutboxMailer(dir, from string, out io.Writer) *OutboxMailer {
	return &OutboxMailer{dir: dir, from: from, out: out, now: time.Now}
}

// Send composes m, writes it to a new file in the outbox folder and prints
// its link. The file is readable by its owner only: it holds the link.
func (o *OutboxMailer) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	subject, text, html, err := Compose(m)
	if err != nil {
		return err
	}
	eml, err := buildEML(o.from, m.Approver, subject, text, html, o.now(), m.RunID)
	if err != nil {
		return fmt.Errorf("write approval mail for run %s: %w", m.RunID, err)
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return fmt.Errorf("write approval mail for run %s: %w", m.RunID, err)
	}
	f, err := os.CreateTemp(o.dir, fileStem(o.now(), m)+"-*.eml")
	if err != nil {
		return fmt.Errorf("write approval mail for run %s: %w", m.RunID, err)
	}
	if _, err := f.Write(eml); err != nil {
		f.Close()
		return fmt.Errorf("write approval mail for run %s: %w", m.RunID, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write approval mail for run %s: %w", m.RunID, err)
	}
	if o.out != nil {
		fmt.Fprintf(o.out, "approval link for %s: %s\n", m.Approver, m.Link)
	}
	return nil
}

// fileStem names an outbox file after the time, run and approver, keeping
// only characters that are safe in a file name.
func fileStem(now time.Time, m Message) string {
	safe := func(s string, max int) string {
		var b strings.Builder
		for _, r := range s {
			if b.Len() >= max {
				break
			}
			switch {
			case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '.':
				b.WriteRune(r)
			case r == '@':
				b.WriteString("_at_")
			default:
				b.WriteByte('_')
			}
		}
		return b.String()
	}
	stem := now.UTC().Format("20060102T150405.000Z") + "-" + safe(m.RunID, 64) + "-" + safe(m.Approver, 64)
	if m.Reminder {
		stem += "-reminder"
	}
	return filepath.Base(stem)
}

// buildEML returns an RFC 5322 message with CRLF line ends: headers, then a
// multipart/alternative body with a quoted-printable text and HTML part.
func buildEML(from, to, subject, text, html string, date time.Time, runID string) ([]byte, error) {
	fromAddr, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("sender address: %w", err)
	}
	toAddr, err := mail.ParseAddress(to)
	if err != nil {
		return nil, fmt.Errorf("recipient address: %w", err)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	domain := "agentgate.local"
	if at := strings.LastIndexByte(fromAddr.Address, '@'); at >= 0 {
		domain = fromAddr.Address[at+1:]
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, part := range []struct{ contentType, content string }{
		{"text/plain; charset=utf-8", text},
		{"text/html; charset=utf-8", html},
	} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.contentType},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		qw := quotedprintable.NewWriter(pw)
		if _, err := io.WriteString(qw, part.content); err != nil {
			return nil, err
		}
		if err := qw.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}

	var out bytes.Buffer
	header := func(name, value string) { fmt.Fprintf(&out, "%s: %s\r\n", name, value) }
	header("From", fromAddr.String())
	header("To", toAddr.String())
	header("Subject", encodeHeader(subject))
	header("Date", date.UTC().Format(time.RFC1123Z))
	header("Message-ID", "<"+hex.EncodeToString(id[:])+"@"+domain+">")
	header("MIME-Version", "1.0")
	header("Auto-Submitted", "auto-generated")
	header("X-Agentgate-Run", encodeHeader(oneLine(CleanText(runID))))
	header("Content-Type", mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()}))
	out.WriteString("\r\n")
	out.Write(body.Bytes())
	return out.Bytes(), nil
}

// maxPlainHeader is the longest header value written as it is; longer ones
// are encoded, which folds them.
const maxPlainHeader = 200

// encodeHeader returns text as the value of an unstructured header (RFC
// 5322 with RFC 2047): as it is when it is short printable ASCII holding no
// "=?", which a mail reader would take for the start of an encoded word;
// otherwise as Q-encoded words of at most 75 characters, each holding whole
// characters, on folded lines, so no header line nears the 998-byte limit
// and the value reads back as text, whatever it contains.
func encodeHeader(text string) string {
	plain := len(text) <= maxPlainHeader && !strings.Contains(text, "=?")
	for i := 0; plain && i < len(text); i++ {
		plain = ' ' <= text[i] && text[i] <= '~'
	}
	if plain {
		return text
	}
	const prefix, suffix = "=?utf-8?q?", "?="
	const room = 75 - len(prefix) - len(suffix)
	var words []string
	var word strings.Builder
	for _, r := range text {
		var enc strings.Builder
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '.':
			enc.WriteRune(r)
		case r == ' ':
			enc.WriteByte('_')
		default:
			var b [utf8.UTFMax]byte
			for _, c := range b[:utf8.EncodeRune(b[:], r)] {
				fmt.Fprintf(&enc, "=%02X", c)
			}
		}
		if word.Len()+enc.Len() > room {
			words = append(words, prefix+word.String()+suffix)
			word.Reset()
		}
		word.WriteString(enc.String())
	}
	if word.Len() > 0 || len(words) == 0 {
		words = append(words, prefix+word.String()+suffix)
	}
	return strings.Join(words, "\r\n ")
}
