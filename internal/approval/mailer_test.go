package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ses"
	sesv1types "github.com/aws/aws-sdk-go-v2/service/ses/types"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approval/approvaltest"
	"github.com/agentgate/agentgate/internal/awscall"
)

func TestOutboxMailer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "outbox")
	var out bytes.Buffer
	mailer := approval.NewOutboxMailer(dir, "Agentgate <approvals@agentgate.test>", &out)
	m := sampleMessage()
	m.Purpose = "Résumé: " + m.Purpose
	m.Calls[0].Tool = "write_é"

	if err := mailer.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got, want := out.String(), "approval link for alice@example.com: "+m.Link+"\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}

	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("outbox holds %v (err %v), want one .eml file", files, err)
	}
	info, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("file mode %v, want owner-only (it holds the link)", perm)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}

	// Every line ends in CRLF and stays within RFC 5322's 998 characters.
	for i, line := range strings.Split(string(raw), "\r\n") {
		if strings.Contains(line, "\n") || len(line) > 998 {
			t.Fatalf("line %d is not a proper CRLF line of at most 998 characters: %q", i+1, line)
		}
	}

	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("net/mail cannot read the .eml: %v", err)
	}
	for _, h := range []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"} {
		if msg.Header.Get(h) == "" {
			t.Errorf("header %s missing", h)
		}
	}
	if _, err := msg.Header.Date(); err != nil {
		t.Errorf("Date header: %v", err)
	}
	if to, err := msg.Header.AddressList("To"); err != nil || len(to) != 1 || to[0].Address != "alice@example.com" {
		t.Errorf("To = %v (err %v), want alice@example.com", to, err)
	}

	got, err := approvaltest.ParseEML(string(raw))
	if err != nil {
		t.Fatalf("ParseEML: %v", err)
	}
	if want := "Approval needed: write_é (run run_01HZX3)"; got.Subject != want {
		t.Errorf("decoded subject = %q, want %q", got.Subject, want)
	}
	if got.From != "approvals@agentgate.test" {
		t.Errorf("From = %q, want approvals@agentgate.test", got.From)
	}
	for name, body := range map[string]string{"text": got.Text, "html": got.HTML} {
		link, ok := approvaltest.ExtractLink(body, "https://gate.example.com/prod")
		if !ok || link != m.Link {
			t.Errorf("%s part: ExtractLink = %q, %v; want %q", name, link, ok, m.Link)
		}
		if !strings.Contains(body, "Résumé") {
			t.Errorf("%s part lost the UTF-8 purpose", name)
		}
	}
	if !strings.Contains(got.HTML, "&lt;script&gt;") || strings.Contains(got.HTML, "<script") {
		t.Error("HTML part is not escaped after the round trip")
	}
}

// TestOutboxMailerHeaders: found by FuzzCompose. A subject of long
// non-ASCII text, or a long run id, was one header line of over 998 bytes
// (RFC 5322's limit), and text holding "=?" went out as it was, so a mail
// reader decoded it as an encoded word and showed something else.
func TestOutboxMailerHeaders(t *testing.T) {
	tests := []struct {
		name  string
		runID string
		tool  string
	}{
		{"long non-ASCII subject", "run_1", strings.Repeat("😀", 60)},
		{"encoded word in the subject", "=?utf-8?q?Approved?=", "write_document"},
		{"encoded word in a tool", "run_1", "=?utf-8?q?nothing_to_see?="},
		{"long run id", strings.Repeat("r", 2000), "write_document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			m := sampleMessage()
			m.RunID, m.Calls[0].Tool = tt.runID, tt.tool
			subject, _, _, err := approval.Compose(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := approval.NewOutboxMailer(dir, "approvals@agentgate.test", nil).Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
			if len(files) != 1 {
				t.Fatalf("%d mails written", len(files))
			}
			raw, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
			for _, line := range bytes.Split(head, []byte("\r\n")) {
				if len(line) > 998 {
					t.Errorf("a header line has %d bytes", len(line))
				}
			}
			msg, err := mail.ReadMessage(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			got, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
			if err != nil || got != subject {
				t.Errorf("Subject reads as %q (%v), want %q", got, err, subject)
			}
		})
	}
}

func TestOutboxMailerRejectsBadMessage(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	m := sampleMessage()
	m.Approver = "not an address"
	if err := approval.NewOutboxMailer(dir, "approvals@agentgate.test", &out).Send(context.Background(), m); err == nil {
		t.Fatal("Send: got nil error, want one")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 || out.Len() != 0 {
		t.Errorf("a failed send left %d files and printed %q", len(entries), out.String())
	}
}

// fakeSES records the calls it is sent and answers with err.
type fakeSES struct {
	calls []awscall.Request
	err   error
}

func (f *fakeSES) Do(_ context.Context, r awscall.Request) (*awscall.Response, error) {
	f.calls = append(f.calls, r)
	if f.err != nil {
		return nil, f.err
	}
	return &awscall.Response{Status: 200, Body: []byte(`{"MessageId":"m-1"}`)}, nil
}

// sdkRequest is what the SDK's SES v2 client sends for in: its method, path
// and body, read by a test server.
func sdkRequest(t *testing.T, in *sesv2.SendEmailInput) (method, path string, body []byte) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path = r.Method, r.URL.Path
		body, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, `{"MessageId":"m-1"}`)
	}))
	defer srv.Close()
	client := sesv2.New(sesv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("a", "s", "")})
	if _, err := client.SendEmail(t.Context(), in); err != nil {
		t.Fatalf("SDK SendEmail: %v", err)
	}
	return method, path, body
}

// TestSESMailer checks the call SESMailer makes against the one the SDK's
// SES v2 client makes for the same mail.
func TestSESMailer(t *testing.T) {
	fake := &fakeSES{}
	m := sampleMessage()
	const from = "approvals@agentgate.test"
	if err := approval.NewSESMailer(fake, from, approval.SESv2).Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(fake.calls) != 1 {
		t.Fatalf("%d calls, want 1", len(fake.calls))
	}
	got := fake.calls[0]
	subject, text, html, _ := approval.Compose(m)
	utf8 := aws.String("UTF-8")
	method, path, body := sdkRequest(t, &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(from),
		Destination:      &sestypes.Destination{ToAddresses: []string{m.Approver}},
		Content: &sestypes.EmailContent{Simple: &sestypes.Message{
			Subject: &sestypes.Content{Data: aws.String(subject), Charset: utf8},
			Body: &sestypes.Body{
				Text: &sestypes.Content{Data: aws.String(text), Charset: utf8},
				Html: &sestypes.Content{Data: aws.String(html), Charset: utf8},
			},
		}},
	})
	if got.Method != method || got.Path != path || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("call %s %s (%s), want the SDK's %s %s, application/json", got.Method, got.Path, got.Header.Get("Content-Type"), method, path)
	}
	var gotBody, wantBody any
	if err := json.Unmarshal(got.Body, &gotBody); err != nil {
		t.Fatalf("body %s: %v", got.Body, err)
	}
	if err := json.Unmarshal(body, &wantBody); err != nil {
		t.Fatalf("SDK body %s: %v", body, err)
	}
	if !reflect.DeepEqual(gotBody, wantBody) {
		t.Errorf("body\n%s\nwant the SDK's\n%s", got.Body, body)
	}
	if !strings.Contains(string(got.Body), `"ToAddresses":["alice@example.com"]`) {
		t.Errorf("body %s does not address alice@example.com", got.Body)
	}
}

// sdkRequestV1 is what the SDK's client of SES's first API sends for in:
// its method, path, Content-Type and body, read by a test server.
func sdkRequestV1(t *testing.T, in *ses.SendEmailInput) (method, path, contentType string, body []byte) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path, contentType = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<SendEmailResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><SendEmailResult><MessageId>m-1</MessageId></SendEmailResult></SendEmailResponse>`)
	}))
	defer srv.Close()
	client := ses.New(ses.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("a", "s", "")})
	if _, err := client.SendEmail(t.Context(), in); err != nil {
		t.Fatalf("SDK SendEmail: %v", err)
	}
	return method, path, contentType, body
}

// TestSESMailerV1 checks the call SESMailer makes with SESv1 against the
// one the SDK's client of SES's first API makes for the same mail.
func TestSESMailerV1(t *testing.T) {
	fake := &fakeSES{}
	m := sampleMessage()
	m.Purpose = "Résumé & prices: 10% + tax=yes"
	const from = "approvals@agentgate.test"
	if err := approval.NewSESMailer(fake, from, approval.SESv1).Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(fake.calls) != 1 {
		t.Fatalf("%d calls, want 1", len(fake.calls))
	}
	got := fake.calls[0]
	subject, text, html, _ := approval.Compose(m)
	utf8 := aws.String("UTF-8")
	method, path, contentType, body := sdkRequestV1(t, &ses.SendEmailInput{
		Source:      aws.String(from),
		Destination: &sesv1types.Destination{ToAddresses: []string{m.Approver}},
		Message: &sesv1types.Message{
			Subject: &sesv1types.Content{Data: aws.String(subject), Charset: utf8},
			Body: &sesv1types.Body{
				Text: &sesv1types.Content{Data: aws.String(text), Charset: utf8},
				Html: &sesv1types.Content{Data: aws.String(html), Charset: utf8},
			},
		},
	})
	if got.Method != method || got.Path != path || got.Header.Get("Content-Type") != contentType {
		t.Errorf("call %s %s (%s), want the SDK's %s %s (%s)", got.Method, got.Path, got.Header.Get("Content-Type"), method, path, contentType)
	}
	gotForm, err := url.ParseQuery(string(got.Body))
	if err != nil {
		t.Fatalf("body %s: %v", got.Body, err)
	}
	wantForm, err := url.ParseQuery(string(body))
	if err != nil {
		t.Fatalf("SDK body %s: %v", body, err)
	}
	if !reflect.DeepEqual(gotForm, wantForm) {
		t.Errorf("form\n%v\nwant the SDK's\n%v", gotForm, wantForm)
	}
	if gotForm.Get("Action") != "SendEmail" || gotForm.Get("Destination.ToAddresses.member.1") != "alice@example.com" ||
		!strings.Contains(gotForm.Get("Message.Body.Html.Data"), m.Link) {
		t.Errorf("form %v is not a SendEmail to alice@example.com with the link", gotForm)
	}
}

func TestSESMailerError(t *testing.T) {
	for _, api := range []approval.SESAPI{approval.SESv2, approval.SESv1} {
		t.Run(string(api), func(t *testing.T) {
			fake := &fakeSES{err: errors.New("MessageRejected: Email address not verified")}
			m := sampleMessage()
			err := approval.NewSESMailer(fake, "approvals@agentgate.test", api).Send(context.Background(), m)
			if !errors.Is(err, fake.err) {
				t.Fatalf("Send error = %v, want it to wrap %v", err, fake.err)
			}
			if strings.Contains(err.Error(), m.Link) || strings.Contains(err.Error(), sampleToken) {
				t.Errorf("error %q reveals the link", err)
			}
		})
	}
}

// TestSESMailerErrorHidesAnEchoedToken: a service's error message may
// repeat values of the request, the body holding the link; the error then
// carried the token, which the caller logs.
func TestSESMailerErrorHidesAnEchoedToken(t *testing.T) {
	for _, api := range []approval.SESAPI{approval.SESv2, approval.SESv1} {
		t.Run(string(api), func(t *testing.T) {
			m := sampleMessage()
			echo := &awscall.APIError{Status: 400, Code: "InvalidParameterValue", Message: "Value at 'message.body.html.data' failed: ..." + m.Link + "..."}
			fake := &fakeSES{err: echo}
			err := approval.NewSESMailer(fake, "approvals@agentgate.test", api).Send(context.Background(), m)
			if err == nil {
				t.Fatal("Send: got nil error, want one")
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), sampleToken) {
					t.Fatalf("error %q (or one it wraps) holds the token", e)
				}
			}
			if !strings.Contains(err.Error(), "InvalidParameterValue") || !strings.Contains(err.Error(), m.RunID) {
				t.Errorf("error %q lost the service's code or the run", err)
			}
		})
	}
}

func TestParseSESAPI(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want approval.SESAPI
		svc  awscall.Service
	}{
		{"", approval.SESv2, awscall.SESv2},
		{"v2", approval.SESv2, awscall.SESv2},
		{" V1 ", approval.SESv1, awscall.SES},
	} {
		got, err := approval.ParseSESAPI(tt.in)
		if err != nil || got != tt.want || got.Service() != tt.svc {
			t.Errorf("ParseSESAPI(%q) = %q (service %v), %v; want %q (%v)", tt.in, got, got.Service(), err, tt.want, tt.svc)
		}
	}
	for _, bad := range []string{"v3", "sesv2", "2", "ses"} {
		if got, err := approval.ParseSESAPI(bad); err == nil || !strings.Contains(err.Error(), "want v2") {
			t.Errorf("ParseSESAPI(%q) = %q, %v; want an error saying what is wanted", bad, got, err)
		}
	}
}

func TestSentMail(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "moto_data.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/moto-api/data.json" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	defer srv.Close()

	sent, err := approvaltest.SentMail(context.Background(), srv.URL+"/")
	if err != nil {
		t.Fatalf("SentMail: %v", err)
	}
	if len(sent) != 3 {
		t.Fatalf("got %d messages, want 3", len(sent))
	}
	const link = "https://gate.example.com/approvals/" + sampleToken
	tests := []struct {
		name     string
		got      approvaltest.SentMessage
		to       []string
		subject  string
		linkIn   string
		htmlOnly bool
	}{
		{"simple html", sent[0], []string{"alice@example.com", "carol@example.com"}, "Approval needed: write_document (run run_1)", "html", true},
		{"simple text", sent[1], []string{"bob@example.com"}, "text", "", false},
		{"raw", sent[2], []string{"dave@example.com"}, "Approval needed: é", "text", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Equal(tt.got.To, tt.to) {
				t.Errorf("To = %v, want %v", tt.got.To, tt.to)
			}
			if tt.got.Subject != tt.subject {
				t.Errorf("Subject = %q, want %q", tt.got.Subject, tt.subject)
			}
			if tt.got.From != "approvals@agentgate.test" {
				t.Errorf("From = %q", tt.got.From)
			}
			body := map[string]string{"html": tt.got.HTML, "text": tt.got.Text}[tt.linkIn]
			if tt.linkIn != "" {
				if got, ok := approvaltest.ExtractLink(body, "https://gate.example.com"); !ok || got != link {
					t.Errorf("ExtractLink(%s) = %q, %v; want %q", tt.linkIn, got, ok, link)
				}
				if got, ok := approvaltest.ExtractLink(tt.got.Body(), "https://gate.example.com"); !ok || got != link {
					t.Errorf("ExtractLink(Body()) = %q, %v; want %q", got, ok, link)
				}
			}
			if tt.htmlOnly && tt.got.Text != "" {
				t.Errorf("Text = %q, want empty (moto keeps the HTML body)", tt.got.Text)
			}
		})
	}

	t.Run("retries moto's transient 500", func(t *testing.T) {
		var calls atomic.Int32
		flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= 2 {
				http.Error(w, "MissingBucket", http.StatusInternalServerError)
				return
			}
			_, _ = w.Write(data)
		}))
		defer flaky.Close()
		sent, err := approvaltest.SentMail(context.Background(), flaky.URL)
		if err != nil || len(sent) != 3 || calls.Load() != 3 {
			t.Errorf("SentMail = %d messages, %v after %d calls; want 3, nil after 3", len(sent), err, calls.Load())
		}
	})

	t.Run("gives up when the context ends", func(t *testing.T) {
		broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "MissingBucket", http.StatusInternalServerError)
		}))
		defer broken.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := approvaltest.SentMail(ctx, broken.URL); err == nil {
			t.Error("SentMail on a broken server: got nil error, want one")
		}
	})

	t.Run("server error", func(t *testing.T) {
		if _, err := approvaltest.SentMail(context.Background(), srv.URL+"/nothing"); err == nil {
			t.Error("SentMail on a 404: got nil error, want one")
		}
	})
}

// localStack serves LocalStack's read-back endpoints: GET /_aws/ses with
// testdata/localstack_ses.json and the health with services; every other
// path is S3's 404 (NoSuchBucket), as LocalStack answers moto's
// /moto-api/data.json.
func localStack(t *testing.T, services string) *httptest.Server {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "localstack_ses.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/_aws/ses":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(data)
		case "/_localstack/health":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"services": {`+services+`}, "edition": "community", "version": "4.14.0"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code></Error>`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSentMailOnLocalStack: SentMail read moto's data.json only, so the
// mail suites could not read their mail back on LocalStack.
func TestSentMailOnLocalStack(t *testing.T) {
	srv := localStack(t, `"ses": "running", "s3": "running"`)
	sent, err := approvaltest.SentMail(context.Background(), srv.URL+"/")
	if err != nil {
		t.Fatalf("SentMail: %v", err)
	}
	const link = "https://gate.example.com/approvals/" + sampleToken
	want := []struct {
		id, subject string
		to          []string
		text, html  bool // whether the part holds the link
	}{
		{"ls-simple-1", "Approval needed: write_document (run run_1)", []string{"alice@example.com", "carol@example.com"}, true, true},
		{"ls-simple-2", "text", []string{"bob@example.com"}, false, false},
		{"ls-raw-1", "Approval needed: é", []string{"dave@example.com"}, true, false},
		{"ls-raw-2", "raw with destinations", []string{"erin@example.com"}, false, false},
		{"ls-templated", "", []string{"frank@example.com"}, false, false},
	}
	if len(sent) != len(want) {
		t.Fatalf("got %d messages, want %d", len(sent), len(want))
	}
	for i, w := range want {
		got := sent[i]
		t.Run(w.id, func(t *testing.T) {
			if got.ID != w.id || got.Subject != w.subject || got.From != "approvals@agentgate.test" || !slices.Equal(got.To, w.to) {
				t.Errorf("got %s %q from %s to %v; want %s %q from approvals@agentgate.test to %v", got.ID, got.Subject, got.From, got.To, w.id, w.subject, w.to)
			}
			for part, body := range map[string]string{"text": got.Text, "html": got.HTML} {
				l, ok := approvaltest.ExtractLink(body, "https://gate.example.com")
				if wantLink := map[string]bool{"text": w.text, "html": w.html}[part]; ok != wantLink || (ok && l != link) {
					t.Errorf("%s part: ExtractLink = %q, %v; want the link: %t", part, l, ok, wantLink)
				}
			}
		})
	}
	if sent[1].Text != "plain only" || sent[1].HTML != "" {
		t.Errorf("a text-only mail read as text %q, html %q", sent[1].Text, sent[1].HTML)
	}
	if sent[2].Raw == "" || sent[2].HTML != "<p>html</p>" {
		t.Errorf("raw mail: Raw %d bytes, HTML %q; want the source and its HTML part", len(sent[2].Raw), sent[2].HTML)
	}

	t.Run("SES not loaded yet", func(t *testing.T) {
		bare := httptest.NewServer(http.NotFoundHandler())
		defer bare.Close()
		_, err := approvaltest.SentMail(context.Background(), bare.URL)
		if err == nil || !strings.Contains(err.Error(), "/_aws/ses") || !strings.Contains(err.Error(), "/moto-api/data.json") {
			t.Errorf("SentMail where neither endpoint is: %v, want an error naming both", err)
		}
	})
}

func TestServesSESv2(t *testing.T) {
	moto := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "NoSuchBucket", http.StatusNotFound) // moto answers LocalStack's paths as S3 buckets
	}))
	defer moto.Close()
	for _, tt := range []struct {
		name     string
		endpoint string
		want     bool
	}{
		{"moto", moto.URL, true},
		{"LocalStack Community", localStack(t, `"ses": "available", "sqs": "running"`).URL, false},
		{"LocalStack Pro without sesv2 in SERVICES", localStack(t, `"ses": "available", "sesv2": "disabled"`).URL, false},
		{"LocalStack Pro", localStack(t, `"ses": "available", "sesv2": "available"`).URL, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := approvaltest.ServesSESv2(context.Background(), tt.endpoint)
			if err != nil || got != tt.want {
				t.Errorf("ServesSESv2 = %t, %v; want %t", got, err, tt.want)
			}
		})
	}
}
