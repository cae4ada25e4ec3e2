package s3state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/agentgate/agentgate/internal/runs"
)

// deleteBatch is DeleteObjects' limit of keys per call.
const deleteBatch = 1000

// Options configure a Bucket.
type Options struct {
	// KMSKeyID, when set, requests SSE-KMS with this key on every put
	// (AGENTGATE_KMS_KEY_ID); otherwise SSE-S3 (AES256).
	KMSKeyID string
}

// Bucket is the state bucket. It implements runs.StateStore.
type Bucket struct {
	client *s3.Client
	name   string
	opts   Options
}

var _ runs.StateStore = (*Bucket)(nil)

// NewBucket returns the bucket called name, reached through client.
func NewBucket(client *s3.Client, name string, opts Options) *Bucket {
	return &Bucket{client: client, name: name, opts: opts}
}

// Name returns the bucket name.
func (b *Bucket) Name() string { return b.name }

// PutState implements runs.StateStore with one PutObject.
func (b *Bucket) PutState(ctx context.Context, runID string, state []byte) (runs.StateRef, error) {
	ref, blob, err := runs.EncodeBlob(runID, state)
	if err != nil {
		return runs.StateRef{}, err
	}
	in := &s3.PutObjectInput{
		Bucket:               &b.name,
		Key:                  &ref.Key,
		Body:                 bytes.NewReader(blob),
		ContentLength:        aws.Int64(int64(len(blob))),
		ContentType:          aws.String("application/gzip"),
		Metadata:             map[string]string{"sha256": ref.SHA256},
		ServerSideEncryption: types.ServerSideEncryptionAes256,
	}
	if b.opts.KMSKeyID != "" {
		in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = &b.opts.KMSKeyID
	}
	if _, err := b.client.PutObject(ctx, in); err != nil {
		return runs.StateRef{}, fmt.Errorf("put %s: %w", ref.Key, err)
	}
	return ref, nil
}

// LoadState implements runs.StateStore with one GetObject.
func (b *Bucket) LoadState(ctx context.Context, ref runs.StateRef) ([]byte, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.name, Key: &ref.Key})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil, runs.Errorf(runs.EGone, "state blob %s is missing", ref.Key)
		}
		return nil, fmt.Errorf("get %s: %w", ref.Key, err)
	}
	defer out.Body.Close()
	blob, err := io.ReadAll(io.LimitReader(out.Body, runs.MaxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref.Key, err)
	}
	return runs.DecodeBlob(ref, blob)
}

// DeleteStates implements runs.StateStore with one DeleteObjects call per
// 1000 keys (S3 does not charge for deletes; a LIST costs as much as a PUT).
func (b *Bucket) DeleteStates(ctx context.Context, refs ...runs.StateRef) error {
	var ids []types.ObjectIdentifier
	seen := map[string]bool{}
	for _, r := range refs {
		if !r.IsZero() && !seen[r.Key] {
			seen[r.Key] = true
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(r.Key)})
		}
	}
	return b.deleteKeys(ctx, ids, "")
}

// DeleteRunStates implements runs.StateStore: it lists the run's prefix and
// deletes it with DeleteObjects, 1000 keys per call.
func (b *Bucket) DeleteRunStates(ctx context.Context, runID string) error {
	return b.DeletePrefix(ctx, runs.RunPrefix(runID))
}

// DeletePrefix deletes every object under prefix.
func (b *Bucket) DeletePrefix(ctx context.Context, prefix string) error {
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: &b.name, Prefix: &prefix, MaxKeys: aws.Int32(deleteBatch)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		if err := b.deleteKeys(ctx, ids, prefix); err != nil {
			return err
		}
	}
	return nil
}

// deleteKeys deletes ids with DeleteObjects, 1000 keys per call; prefix,
// if any, names where they are in an error.
func (b *Bucket) deleteKeys(ctx context.Context, ids []types.ObjectIdentifier, prefix string) error {
	for len(ids) > 0 {
		n := min(len(ids), deleteBatch)
		out, err := b.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.name,
			Delete: &types.Delete{Objects: ids[:n], Quiet: aws.Bool(true)},
		})
		if err != nil {
			if prefix != "" {
				return fmt.Errorf("delete under %s: %w", prefix, err)
			}
			return fmt.Errorf("delete %s: %w", aws.ToString(ids[0].Key), err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete %s: %s: %s (and %d more)", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1)
		}
		ids = ids[n:]
	}
	return nil
}

// CreateBucket creates the bucket in region with default encryption (SSE-S3,
// or SSE-KMS with kmsKeyID), public access blocked, and a lifecycle rule
// that expires blobs under runs/ after backstopDays (a backstop to purge). An
// existing bucket of ours is fine. It reports whether it created the bucket.
func CreateBucket(ctx context.Context, client *s3.Client, name, region, kmsKeyID string, backstopDays int32) (created bool, err error) {
	// us-east-1 answers 200 to a CreateBucket of a bucket we own, so look first.
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name}); err != nil {
		in := &s3.CreateBucketInput{Bucket: &name}
		if region != "" && region != "us-east-1" {
			in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(region)}
		}
		_, err = client.CreateBucket(ctx, in)
		var owned *types.BucketAlreadyOwnedByYou
		switch {
		case err == nil:
			created = true
		case errors.As(err, &owned):
		default:
			return false, fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	rule := types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}
	if kmsKeyID != "" {
		rule = types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAwsKms, KMSMasterKeyID: &kmsKeyID}
	}
	if _, err := client.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{
		Bucket: &name,
		ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
			Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &rule}},
		},
	}); err != nil {
		return created, fmt.Errorf("set default encryption on %s: %w", name, err)
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
		Bucket: &name,
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{
			BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true),
			IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true),
		},
	}); err != nil {
		return created, fmt.Errorf("block public access on %s: %w", name, err)
	}
	if backstopDays > 0 {
		if _, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
			Bucket: &name,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
				ID:                             aws.String("agentgate-state-backstop"),
				Status:                         types.ExpirationStatusEnabled,
				Filter:                         &types.LifecycleRuleFilter{Prefix: aws.String("runs/")},
				Expiration:                     &types.LifecycleExpiration{Days: aws.Int32(backstopDays)},
				AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)},
			}}},
		}); err != nil {
			return created, fmt.Errorf("set lifecycle on %s: %w", name, err)
		}
	}
	return created, nil
}
