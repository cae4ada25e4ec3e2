package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// The IAM policy of each function is written out statement by statement
// (no Grant* helpers, no managed policies) so that what each function may do
// is readable here and checked one statement at a time by the tests.
//
//	startrun: reads and writes runs, never deletes; reads and writes state
//	          blobs, reads documents; dispatches itself.
//	resume:   as startrun, plus deletes settled state blobs and writes and
//	          deletes documents (the approved write tools run here, never in
//	          startrun), and deletes approvers' inbox entries (a decision or
//	          a cancel takes the run out of their inboxes); dispatches itself.
//	purge:    deletes items and objects (expiry, retention) and batch-writes;
//	          queries the due index; dispatches startrun and resume.
//	all:      send their failed asynchronous invocations to the failed-events
//	          queue (Lambda delivers on-failure records with the role).

// accessArns are the resources the statements name.
type accessArns struct {
	table, dueIndex                                  *string
	bucket, stateObjects, stateBlobs, documents, key *string
	startrun, resume                                 *string
	models                                           []*string
	apiKeySecret                                     *string
	sesIdentity, mailFrom                            *string
	failedEvents                                     *string
}

// Statement ids, one per kind of access; the tests look statements up by them.
const (
	sidLogs          = "WriteOwnLogs"
	sidRunTable      = "RunTable"
	sidDueIndex      = "QueryDueIndex"
	sidStateBlobs    = "StateBlobs"
	sidDeleteState   = "DeleteSettledStateBlobs"
	sidDocuments     = "Documents"
	sidListBucket    = "ListBucket"
	sidStateKey      = "StateKey"
	sidDispatch      = "DispatchWorker"
	sidInvokeModel   = "InvokeConfiguredModels"
	sidReadAPIKey    = "ReadModelAPIKey"
	sidSendMail      = "SendApprovalMail"
	sidPurgeStateObj = "PurgeStateObjects"
	sidFailedEvents  = "RecordFailedEvents"
	sidInboxEntries  = "DropInboxEntries"
)

// inboxKeyPrefix starts the partition key of the approvers' inbox entries
// (internal/runs/dynamo: INBOX#<approver key>).
const inboxKeyPrefix = "INBOX#"

// dropInboxEntries lets resume delete approvers' inbox entries, and
// nothing else: a decision or a cancel deletes them in its transaction.
// The condition holds every key the request touches to the inbox
// partitions, so resume still cannot delete a run, an event or a token.
func dropInboxEntries(a accessArns) awsiam.PolicyStatement {
	return allow(sidInboxEntries, []string{"dynamodb:DeleteItem"}, []*string{a.table},
		map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": inboxKeyPrefix + "*"}})
}

func allow(sid string, actions []string, resources []*string, conditions map[string]any) awsiam.PolicyStatement {
	props := &awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}
	if conditions != nil {
		props.Conditions = &conditions
	}
	return awsiam.NewPolicyStatement(props)
}

func logStatement(logGroupArn *string) awsiam.PolicyStatement {
	return allow(sidLogs, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, []*string{logGroupArn}, nil)
}

// Read and non-deleting write access to the run table, shared by the
// workers: what internal/runs/dynamo calls (GetItem, Query, PutItem, and
// TransactWriteItems of Puts and Updates, authorized per item).
var workerTableActions = []string{
	"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem",
}

// Keys for SSE-KMS puts and gets through the S3 bucket key.
var stateKeyActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}

// listBucket lets a function list the bucket. It carries no s3:prefix
// condition on purpose: S3 answers a GetObject or HeadObject of a missing
// key with 404 NoSuchKey only to callers allowed to list the bucket, and
// with 403 AccessDenied otherwise; the adapters read "not found" (a new
// document's preview, a missing blob) from NoSuchKey. A prefix-conditioned
// ListBucket does not count for that check.
func listBucket(a accessArns) awsiam.PolicyStatement {
	return allow(sidListBucket, []string{"s3:ListBucket"}, []*string{a.bucket}, nil)
}

// recordFailedEvents lets Lambda deliver the function's failed asynchronous
// invocations to the failed-events queue (its on-failure destination, which
// Lambda writes to with the function's role).
func recordFailedEvents(a accessArns) awsiam.PolicyStatement {
	return allow(sidFailedEvents, []string{"sqs:SendMessage"}, []*string{a.failedEvents}, nil)
}

// sendMail lets a function mail approvers from the sender alone. SES v2's
// SendEmail and SES's first API's (AGENTGATE_SES_API=v1) are both the
// action ses:SendEmail on the sender's identity, and ses:FromAddress
// conditions both, so the statement does not depend on the API.
func sendMail(a accessArns) awsiam.PolicyStatement {
	return allow(sidSendMail, []string{"ses:SendEmail"}, []*string{a.sesIdentity},
		map[string]any{"StringEquals": map[string]any{"ses:FromAddress": a.mailFrom}})
}

func invokeModels(a accessArns) []awsiam.PolicyStatement {
	if len(a.models) == 0 {
		return nil
	}
	return []awsiam.PolicyStatement{allow(sidInvokeModel, []string{"bedrock:InvokeModel"}, a.models, nil)}
}

func readAPIKey(a accessArns) []awsiam.PolicyStatement {
	if a.apiKeySecret == nil {
		return nil
	}
	return []awsiam.PolicyStatement{allow(sidReadAPIKey, []string{"secretsmanager:GetSecretValue"}, []*string{a.apiKeySecret}, nil)}
}

// startRunStatements: startrun runs a run's first segment and the
// continuations it dispatches to itself, which make every call the policy
// lets run unasked, a document write or delete included (and its
// idempotency marker), and settle the runs that end there, deleting their
// state blobs; so it writes documents and deletes state blobs as resume
// does (outside tester helper-113: with documents read-only, an allowed
// write ended interrupted_write on AWS, which moto's missing IAM hid). It
// deletes no table item.
func startRunStatements(a accessArns) []awsiam.PolicyStatement {
	out := []awsiam.PolicyStatement{
		allow(sidRunTable, workerTableActions, []*string{a.table}, nil),
		allow(sidStateBlobs, []string{"s3:GetObject", "s3:PutObject"}, []*string{a.stateObjects}, nil),
		allow(sidDeleteState, []string{"s3:DeleteObject"}, []*string{a.stateBlobs}, nil),
		allow(sidDocuments, []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, []*string{a.documents}, nil),
		listBucket(a),
		allow(sidStateKey, stateKeyActions, []*string{a.key}, nil),
		allow(sidDispatch, []string{"lambda:InvokeFunction"}, []*string{a.startrun}, nil),
		sendMail(a),
		recordFailedEvents(a),
	}
	return append(append(out, invokeModels(a)...), readAPIKey(a)...)
}

func resumeStatements(a accessArns) []awsiam.PolicyStatement {
	out := []awsiam.PolicyStatement{
		allow(sidRunTable, workerTableActions, []*string{a.table}, nil),
		allow(sidStateBlobs, []string{"s3:GetObject", "s3:PutObject"}, []*string{a.stateObjects}, nil),
		allow(sidDeleteState, []string{"s3:DeleteObject"}, []*string{a.stateBlobs}, nil),
		allow(sidDocuments, []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, []*string{a.documents}, nil),
		listBucket(a),
		allow(sidStateKey, stateKeyActions, []*string{a.key}, nil),
		allow(sidDispatch, []string{"lambda:InvokeFunction"}, []*string{a.resume}, nil),
		dropInboxEntries(a),
		sendMail(a),
		recordFailedEvents(a),
	}
	return append(append(out, invokeModels(a)...), readAPIKey(a)...)
}

func purgeStatements(a accessArns) []awsiam.PolicyStatement {
	return []awsiam.PolicyStatement{
		allow(sidRunTable, []string{
			"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem",
			"dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:BatchGetItem",
		}, []*string{a.table}, nil),
		allow(sidDueIndex, []string{"dynamodb:Query"}, []*string{a.dueIndex}, nil),
		allow(sidPurgeStateObj, []string{"s3:DeleteObject"}, []*string{a.stateObjects}, nil),
		listBucket(a),
		allow(sidDispatch, []string{"lambda:InvokeFunction"}, []*string{a.startrun, a.resume}, nil),
		sendMail(a),
		recordFailedEvents(a),
	}
}
