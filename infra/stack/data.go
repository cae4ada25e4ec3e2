package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// Names fixed by CONTRACTS.md.
const (
	DueIndexName = "due-index"
	TTLAttribute = "expires_at"
	// StatePrefix holds the runs' suspended-state blobs (runs/<id>/state/...).
	StatePrefix = "runs/"
	// ContentPrefix holds the documents of the builtin tools.
	ContentPrefix = "content/"
)

// dataStore is the run table and the state bucket with its key.
type dataStore struct {
	table  awsdynamodb.Table
	bucket awss3.Bucket
	key    awskms.Key
}

func newDataStore(st awscdk.Stack, p AgentgateStackProps) dataStore {
	table := awsdynamodb.NewTable(st, jsii.String("Runs"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(TTLAttribute),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(p.DeletionProtection),
		RemovalPolicy:      p.removalPolicy(),
	})
	table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(DueIndexName),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("due_pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("due_at"), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	key := awskms.NewKey(st, jsii.String("StateKey"), &awskms.KeyProps{
		Description:       jsii.String("agentgate state bucket (S3 bucket key)"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     p.removalPolicy(),
	})

	bucket := awss3.NewBucket(st, jsii.String("State"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Encryption:        awss3.BucketEncryption_KMS,
		EncryptionKey:     key,
		BucketKeyEnabled:  jsii.Bool(true),
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(true),
		RemovalPolicy:     p.removalPolicy(),
		LifecycleRules: &[]*awss3.LifecycleRule{
			{
				Id:                                  jsii.String("abort-incomplete-uploads"),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			},
			{
				Id:                          jsii.String("expire-noncurrent-versions"),
				NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(p.NoncurrentDays)),
				ExpiredObjectDeleteMarker:   jsii.Bool(true),
			},
			{
				Id:         jsii.String("expire-orphan-state-blobs"),
				Prefix:     jsii.String(StatePrefix),
				Expiration: awscdk.Duration_Days(jsii.Number(p.StateBlobDays)),
			},
		},
	})
	return dataStore{table: table, bucket: bucket, key: key}
}
