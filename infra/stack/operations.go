package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// What happens to an asynchronous invocation that fails (DESIGN.md,
// "Execution on Lambda"): the API and purge dispatch the workers with
// InvocationType=Event, and EventBridge invokes purge the same way.
//
//	startrun, resume  a worker returns an error only when it could not bring
//	                  the run to a durable state (a store outage); Lambda
//	                  retries it WorkerRetryAttempts times, which is harmless
//	                  because a job whose run is not claimable is a no-op.
//	                  An event that waited WorkerMaxEventAge (throttled) is
//	                  dropped: by then the sweep has re-dispatched the run
//	                  (lost dispatches are re-sent after 2 minutes).
//	purge             a failed sweep is not retried and a tick that cannot
//	                  start within PurgeMaxEventAge (the previous sweep still
//	                  holds the one reserved execution) is dropped: the next
//	                  tick sweeps again.
//
// Every dropped or finally failed event goes to the failed-events queue
// (the on-failure destination of all three functions and the dead-letter
// queue of the purge rule's target), and the queue's alarm notifies the
// alarm topic as soon as one record is in it.
const (
	WorkerRetryAttempts = 2
	PurgeRetryAttempts  = 0
	// PurgeReservedConcurrency is purge's reserved concurrency: one sweep at a time.
	PurgeReservedConcurrency = 1
)

var (
	// WorkerMaxEventAge is how long a worker dispatch may wait to run.
	WorkerMaxEventAge = awscdk.Duration_Hours(jsii.Number(1))
	// PurgeMaxEventAge is how long a purge tick may wait to run (the
	// shortest age Lambda accepts).
	PurgeMaxEventAge = awscdk.Duration_Minutes(jsii.Number(1))
)

// MaxFailedEventsRetention is how long the failed-events queue keeps a
// record at most (SQS's longest retention period).
const MaxFailedEventsRetention = 14 * 24 * time.Hour

// failedEventsRetention is how long the failed-events queue keeps a record
// for inspection: MaxFailedEventsRetention, or the deployment's retention
// when that is shorter. A worker's on-failure record carries its job, and
// with it the run's row (the prompt, the held calls' inputs): the
// retention purge does not reach the queue, so the queue's own expiry keeps
// a record no longer than the purge keeps the run it came from.
func failedEventsRetention(p AgentgateStackProps) awscdk.Duration {
	r, err := time.ParseDuration(p.Retention)
	if err != nil || r >= MaxFailedEventsRetention {
		r = MaxFailedEventsRetention // Validate refuses a retention that does not parse
	}
	return awscdk.Duration_Seconds(jsii.Number(float64(r / time.Second)))
}

// operations are the resources that tell operators something went wrong.
type operations struct {
	// failures receives failed asynchronous invocations (Lambda on-failure
	// destination records) and failed purge-rule deliveries.
	failures awssqs.Queue
	// alarms is the SNS topic every alarm of the stack notifies.
	alarms   awssns.Topic
	alarmKey awskms.Key
	// failuresAlarm fires while failures holds a record.
	failuresAlarm awscloudwatch.Alarm
}

func newOperations(st awscdk.Stack, p AgentgateStackProps) operations {
	failures := awssqs.NewQueue(st, jsii.String("FailedEvents"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: failedEventsRetention(p),
		RemovalPolicy:   p.removalPolicy(),
	})

	// SNS topics are encrypted with a customer managed key: CloudWatch
	// cannot publish to a topic under the AWS managed aws/sns key.
	key := awskms.NewKey(st, jsii.String("AlarmKey"), &awskms.KeyProps{
		Description:       jsii.String("agentgate alarm topic"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     p.removalPolicy(),
	})
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
	}), jsii.Bool(false))
	alarms := awssns.NewTopic(st, jsii.String("Alarms"), &awssns.TopicProps{
		DisplayName: jsii.String("agentgate alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	if p.AlarmEmail != "" {
		alarms.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	}

	alarm := awscloudwatch.NewAlarm(st, jsii.String("FailedEventsAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("agentgate: an asynchronous invocation failed or was dropped (worker dispatch or purge tick); " +
			"the record is in the failed-events queue (FailedEventsQueueUrl)"),
		Metric: failures.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period:    awscdk.Duration_Minutes(jsii.Number(1)),
			Statistic: jsii.String("Maximum"),
		}),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(1),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	action := awscloudwatchactions.NewSnsAction(alarms)
	alarm.AddAlarmAction(action)
	alarm.AddOkAction(action)
	return operations{failures: failures, alarms: alarms, alarmKey: key, failuresAlarm: alarm}
}

// asyncSettings are the event-invoke settings of one function.
type asyncSettings struct {
	retryAttempts float64
	maxEventAge   awscdk.Duration
}

// configureAsync sets fn's retry attempts, maximum event age and on-failure
// destination. It depends on the function's role, which must already allow
// sqs:SendMessage on the queue: Lambda checks that when it stores the
// configuration.
func configureAsync(st awscdk.Stack, id string, fn awslambda.Function, role awsiam.Role, ops operations, s asyncSettings) awslambda.CfnEventInvokeConfig {
	cfg := awslambda.NewCfnEventInvokeConfig(st, jsii.String(id+"AsyncInvoke"), &awslambda.CfnEventInvokeConfigProps{
		FunctionName:             fn.FunctionName(),
		Qualifier:                jsii.String("$LATEST"),
		MaximumRetryAttempts:     jsii.Number(s.retryAttempts),
		MaximumEventAgeInSeconds: s.maxEventAge.ToSeconds(nil),
		DestinationConfig: &awslambda.CfnEventInvokeConfig_DestinationConfigProperty{
			OnFailure: &awslambda.CfnEventInvokeConfig_OnFailureProperty{Destination: ops.failures.QueueArn()},
		},
	})
	cfg.Node().AddDependency(role)
	return cfg
}
