package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/s3state"
)

func init() {
	commands["init"] = command{
		summary: "create the runs table (due index, TTL) and the state bucket on an endpoint, idempotently",
		run:     runInit,
	}
}

// initStateBackstopDays is the S3 lifecycle backstop for blobs under runs/
// (purge deletes them long before).
const initStateBackstopDays = 90

func runInit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	endpoint := fs.String("endpoint", os.Getenv("AWS_ENDPOINT_URL"), "AWS endpoint, e.g. http://localhost:4566 for moto or LocalStack (default $AWS_ENDPOINT_URL; empty = AWS)")
	table := fs.String("table", initEnvOr("AGENTGATE_TABLE", "agentgate-runs"), "DynamoDB table name")
	bucket := fs.String("bucket", initEnvOr("AGENTGATE_BUCKET", "agentgate-state"), "S3 bucket name")
	region := fs.String("region", initEnvOr("AWS_REGION", "us-east-1"), "AWS region")
	kmsKey := fs.String("kms-key-id", os.Getenv("AGENTGATE_KMS_KEY_ID"), "KMS key for the bucket's default encryption (empty = SSE-S3)")
	if err := parseFlags(fs, args, false, stdout); err != nil {
		return err
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(*region)}
	if *endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(*endpoint))
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			// Emulators accept any credentials.
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	where := *endpoint
	if where == "" {
		where = "AWS " + *region
	}

	created, err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(cfg), *table)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "table  %-24s %s (index %s, ttl %s) on %s\n", *table, initVerb(created), dynamo.DueIndex, dynamo.TTLAttribute, where)

	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = *endpoint != "" })
	created, err = s3state.CreateBucket(ctx, s3c, *bucket, *region, *kmsKey, initStateBackstopDays)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bucket %-24s %s (encrypted, public access blocked) on %s\n", *bucket, initVerb(created), where)
	return nil
}

func initVerb(created bool) string {
	if created {
		return "created"
	}
	return "exists "
}

func initEnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
