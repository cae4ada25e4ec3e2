package docstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// DefaultS3Prefix is where documents live in the service bucket.
const DefaultS3Prefix = "content/"

// maxS3KeyBytes is the longest S3 object key.
const maxS3KeyBytes = 1024

// maxS3ListKeys is the most keys one List call looks at (valid or not);
// past it the listing stops as if at its limit.
const maxS3ListKeys = maxListVisits

// S3Client is the part of *s3.Client that S3Backend uses.
type S3Client interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var _ S3Client = (*s3.Client)(nil)

// S3Config says where S3Backend keeps documents and how puts are encrypted.
type S3Config struct {
	// Bucket is the bucket name (AGENTGATE_BUCKET). Required.
	Bucket string
	// Prefix is the key prefix of documents; empty means DefaultS3Prefix. A
	// non-empty prefix must end with "/".
	Prefix string
	// KMSKeyID, when set (AGENTGATE_KMS_KEY_ID), requests SSE-KMS with this
	// key on every put; otherwise puts request SSE-S3 (AES256).
	KMSKeyID string
}

// S3Backend keeps documents as objects "<prefix><path>" in a bucket and
// idempotency markers as "<prefix>.applied/<marker>".
type S3Backend struct {
	client S3Client
	cfg    S3Config
}

var _ Backend = (*S3Backend)(nil)

// NewS3Backend returns a backend over client, which the caller builds once
// and shares. It fails when the bucket is missing or the prefix is malformed.
func NewS3Backend(client S3Client, cfg S3Config) (*S3Backend, error) {
	if client == nil {
		return nil, fmt.Errorf("docstore: S3 client is nil")
	}
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("docstore: S3 bucket is empty (set AGENTGATE_BUCKET)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultS3Prefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") || strings.HasPrefix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("docstore: S3 prefix %q must be relative and end with \"/\"", cfg.Prefix)
	}
	if err := validatePrefix(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("docstore: S3 prefix %q: %w", cfg.Prefix, err)
	}
	// Every valid path and every marker key must fit in an S3 key.
	if n := len(cfg.Prefix) + max(MaxPathBytes, len(appliedDir)+1+64); n > maxS3KeyBytes {
		return nil, fmt.Errorf("docstore: S3 prefix %q is too long: with a %d-byte document path the key would have %d bytes; S3 allows %d", cfg.Prefix, MaxPathBytes, n, maxS3KeyBytes)
	}
	return &S3Backend{client: client, cfg: cfg}, nil
}

func (b *S3Backend) key(p string) string { return b.cfg.Prefix + p }

func (b *S3Backend) markerDir() string { return b.cfg.Prefix + appliedDir + "/" }

func (b *S3Backend) uri(key string) string { return "s3://" + b.cfg.Bucket + "/" + key }

// Get implements Backend. The version is the object's ETag.
func (b *S3Backend) Get(ctx context.Context, p string) (string, string, error) {
	if err := ValidatePath(p); err != nil {
		return "", "", err
	}
	data, etag, err := b.getObject(ctx, b.key(p))
	if err != nil {
		return "", "", err
	}
	if !utf8.Valid(data) {
		return "", "", ErrNotText
	}
	return string(data), etag, nil
}

func (b *S3Backend) getObject(ctx context.Context, key string) ([]byte, string, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		if isS3NotFound(err) {
			return nil, "", ErrNotFound
		}
		if s3ErrorCode(err) == "InvalidObjectState" { // archived (Glacier)
			return nil, "", ErrNotDocument
		}
		return nil, "", fmt.Errorf("get %s: %w", b.uri(key), err)
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > MaxDocumentBytes {
		return nil, "", ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(out.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", b.uri(key), err)
	}
	if len(data) > MaxDocumentBytes {
		return nil, "", ErrTooLarge
	}
	return data, strings.Trim(aws.ToString(out.ETag), `"`), nil
}

// Put implements Backend.
func (b *S3Backend) Put(ctx context.Context, p, text string) error {
	if err := ValidatePath(p); err != nil {
		return err
	}
	return b.putObject(ctx, b.key(p), text, "text/plain; charset=utf-8")
}

func (b *S3Backend) putObject(ctx context.Context, key, body, contentType string) error {
	in := &s3.PutObjectInput{
		Bucket:               aws.String(b.cfg.Bucket),
		Key:                  aws.String(key),
		Body:                 strings.NewReader(body),
		ContentLength:        aws.Int64(int64(len(body))),
		ContentType:          aws.String(contentType),
		ServerSideEncryption: s3types.ServerSideEncryptionAes256,
	}
	if b.cfg.KMSKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(b.cfg.KMSKeyID)
	}
	if _, err := b.client.PutObject(ctx, in); err != nil {
		return notAppliedIfRefused(fmt.Errorf("put %s: %w", b.uri(key), err))
	}
	return nil
}

// notAppliedIfRefused marks an S3 error as ErrNotApplied when S3 answered
// with a 4xx status (the request was refused: access denied, no such
// bucket, a KMS key it may not use…); a 5xx or a transport error leaves the
// outcome unknown.
func notAppliedIfRefused(err error) error {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		return fmt.Errorf("%w: %w", ErrNotApplied, err)
	}
	return err
}

// Delete implements Backend.
func (b *S3Backend) Delete(ctx context.Context, p string) error {
	if err := ValidatePath(p); err != nil {
		return err
	}
	key := b.key(p)
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(key)})
	if err != nil && !isS3NotFound(err) {
		return notAppliedIfRefused(fmt.Errorf("delete %s: %w", b.uri(key), err))
	}
	return nil
}

// List implements Backend. Keys that are not valid document paths (folder
// placeholders ending in "/", for example) are skipped, and the marker
// folder is jumped over rather than paged through.
func (b *S3Backend) List(ctx context.Context, prefix string, limit int) ([]DocumentInfo, bool, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, false, err
	}
	markers := b.markerDir()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.cfg.Bucket), Prefix: aws.String(b.key(prefix))}
	if limit >= 0 && limit < 1000 {
		in.MaxKeys = aws.Int32(int32(limit) + 1)
	}
	var docs []DocumentInfo
	seen := 0
	for {
		out, err := b.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("list %s: %w", b.uri(b.key(prefix)), err)
		}
		lastIsMarker := false
		for _, obj := range out.Contents {
			if seen++; seen > maxS3ListKeys {
				return docs, true, nil
			}
			key := aws.ToString(obj.Key)
			lastIsMarker = strings.HasPrefix(key, markers)
			p := strings.TrimPrefix(key, b.cfg.Prefix)
			if lastIsMarker || ValidatePath(p) != nil {
				continue
			}
			if limit >= 0 && len(docs) == limit {
				return docs, true, nil
			}
			docs = append(docs, DocumentInfo{Path: p, Size: aws.ToInt64(obj.Size)})
		}
		if !aws.ToBool(out.IsTruncated) {
			return docs, false, nil
		}
		if lastIsMarker {
			// Markers are lowercase hex names; "~" sorts after all of them.
			in.ContinuationToken = nil
			in.StartAfter = aws.String(markers + "~")
			continue
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// Applied implements Backend.
func (b *S3Backend) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if !validMarker(marker) {
		return nil, false, fmt.Errorf("docstore: malformed marker %q", marker)
	}
	data, _, err := b.getObject(ctx, b.markerDir()+marker)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// MarkApplied implements Backend.
func (b *S3Backend) MarkApplied(ctx context.Context, marker string, record []byte) error {
	if !validMarker(marker) {
		return fmt.Errorf("docstore: malformed marker %q", marker)
	}
	return b.putObject(ctx, b.markerDir()+marker, string(record), "application/json")
}

func isS3NotFound(err error) bool {
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var nf *s3types.NotFound
	if errors.As(err, &nf) {
		return true
	}
	switch s3ErrorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	}
	return false
}

func s3ErrorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}
