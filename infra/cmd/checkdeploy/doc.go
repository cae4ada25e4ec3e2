// Command checkdeploy checks a deployed agentgate stack through the AWS APIs:
// the table (keys, due-index, billing, TTL, PITR), the bucket (KMS
// encryption, bucket key, versioning, public access block, lifecycle), the
// three functions (runtime, handler, architecture, environment, reserved
// concurrency, event-invoke config), the failed-events queue and its alarm,
// the REST API (every route, its authorization and Lambda proxy
// integration, request validation, the stage's throttles and logging), the
// web ACL on the stage and the purge rule (schedule, target).
//
//	AWS_ENDPOINT_URL=http://localhost:4566 go run ./cmd/checkdeploy -stack Agentgate
//
// Every property is read from the live service first. moto applies only part
// of a CloudFormation resource (it drops, for example, a function's
// Architectures and a bucket's VersioningConfiguration); when the endpoint is
// moto and a live value differs for one of those known gaps, the property is
// checked in the template the emulator deployed instead, and the line says so.
// Against LocalStack or AWS every check is live. Resource types the
// emulator's CloudFormation does not create at all (moto: the stage, the
// web ACL, event-invoke configs, alarms, request validators, models...) are
// listed in a "does not hold" note and checked in the deployed template.
package main
