package docstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// fakeS3 records puts and answers gets with NoSuchKey; the behaviour suite
// runs against moto in the integration tests.
type fakeS3 struct {
	S3Client
	puts []*s3.PutObjectInput
}

func (f *fakeS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	f.puts = append(f.puts, in)
	return &s3.PutObjectOutput{}, nil
}

func (f *fakeS3) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, &s3types.NoSuchKey{}
}

func TestNewS3BackendConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     S3Config
		wantErr bool
	}{
		{"defaults", S3Config{Bucket: "b"}, false},
		{"own prefix", S3Config{Bucket: "b", Prefix: "site/"}, false},
		{"no bucket", S3Config{}, true},
		{"prefix without slash", S3Config{Bucket: "b", Prefix: "site"}, true},
		{"absolute prefix", S3Config{Bucket: "b", Prefix: "/site/"}, true},
		{"longest prefix", S3Config{Bucket: "b", Prefix: strings.Repeat("p", 255) + "/" + strings.Repeat("q", 255) + "/"}, false},
		// A 512-byte document path would make a key over S3's 1024 bytes.
		{"prefix too long", S3Config{Bucket: "b", Prefix: strings.Repeat("p", 255) + "/" + strings.Repeat("q", 255) + "/x/"}, true},
		{"prefix with a control character", S3Config{Bucket: "b", Prefix: "si\nte/"}, true},
		{"prefix with ..", S3Config{Bucket: "b", Prefix: "a/../b/"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewS3Backend(&fakeS3{}, tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Errorf("NewS3Backend(%+v) error = %v, want error %v", tt.cfg, err, tt.wantErr)
			}
		})
	}
}

func TestS3BackendRequests(t *testing.T) {
	tests := []struct {
		name    string
		kms     string
		wantSSE s3types.ServerSideEncryption
	}{
		{"SSE-S3", "", s3types.ServerSideEncryptionAes256},
		{"SSE-KMS", "key-1", s3types.ServerSideEncryptionAwsKms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeS3{}
			b, err := NewS3Backend(fake, S3Config{Bucket: "bkt", KMSKeyID: tt.kms})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := b.Put(ctx, "guide/a.md", "text"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.Get(ctx, "guide/a.md"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get error = %v, want ErrNotFound", err)
			}
			if len(fake.puts) != 1 {
				t.Fatalf("puts = %d, want 1", len(fake.puts))
			}
			in := fake.puts[0]
			if aws.ToString(in.Bucket) != "bkt" || aws.ToString(in.Key) != "content/guide/a.md" {
				t.Errorf("put to %s/%s, want bkt/content/guide/a.md", aws.ToString(in.Bucket), aws.ToString(in.Key))
			}
			if in.ServerSideEncryption != tt.wantSSE || aws.ToString(in.SSEKMSKeyId) != tt.kms {
				t.Errorf("SSE = %q key %q, want %q key %q", in.ServerSideEncryption, aws.ToString(in.SSEKMSKeyId), tt.wantSSE, tt.kms)
			}
		})
	}
}
