package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// serializer is a reverse proxy in front of the emulator that sends the
// DynamoDB requests on one at a time (S3 and the rest pass freely).
//
// moto server runs each request on its own thread without a lock, and its
// TransactWriteItems deep-copies the table, applies the items and, when
// one fails, puts the copy back: writes that other requests made meanwhile
// vanish and rows go back in version (the first soak on moto found exactly
// that: a cancel that answered 200 undone, a row older than its events).
// DynamoDB never does that, so the soak, like the integration suite
// (runstest/awstest), serializes at the emulator boundary; the races the
// soak looks for -- read, conditional write, crash, re-read -- still
// interleave freely between requests. What the proxy forwards reaches the
// emulator whole even when the server dies meanwhile, as a request that
// left a dying process reaches DynamoDB.
type serializer struct {
	URL string
	srv *http.Server
	mu  sync.Mutex
}

func startSerializer(target string) (*serializer, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("emulator endpoint %q is not a URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &serializer{URL: "http://" + ln.Addr().String()}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// A request of a killed server fails here; that is expected.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_") {
			proxy.ServeHTTP(w, r)
			return
		}
		// Read the whole request first: a request the dying server did not
		// finish sending never reaches the emulator.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "incomplete request", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		defer s.mu.Unlock()
		proxy.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *serializer) Close() error { return s.srv.Close() }

// awsDocs seeds and reads the documents of the server's bucket
// (content/<path>, as the S3 document backend keeps them).
type awsDocs struct {
	s3     *s3.Client
	bucket string
}

func newAWSDocs(ctx context.Context, endpoint, bucket string) (*awsDocs, error) {
	if bucket == "" {
		return nil, errors.New("AGENTGATE_BUCKET is not set")
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithBaseEndpoint(endpoint))
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return &awsDocs{s3: s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		o.DisableLogOutputChecksumValidationSkipped = true
	}), bucket: bucket}, nil
}

// seedDocuments are the documents the script reads.
var seedDocuments = map[string]string{
	"pages/pricing.md": "# Pricing\n\n- Starter: free\n- Team: 10 EUR per user and month\n",
	"pages/about.md":   "# About us\n\nWe build tools that ask before they act.\n",
}

func (d *awsDocs) seed(ctx context.Context) error {
	for p, text := range seedDocuments {
		if _, err := d.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("content/" + p), Body: strings.NewReader(text)}); err != nil {
			return fmt.Errorf("seed %s: %w", p, err)
		}
	}
	return nil
}

func (d *awsDocs) read(p string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := d.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("content/" + p)})
	if err != nil {
		return "", false
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err == nil
}

// awsEndpoint is the emulator's endpoint from the environment.
func awsEndpoint() string {
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		return e
	}
	return "http://localhost:4566"
}
