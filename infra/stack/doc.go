// Package stack defines the agentgate AWS deployment as one CDK stack:
// the run table, the state bucket with its own KMS key, the three Lambda
// functions (startrun, resume, purge) with one least-privilege role each,
// the REST API (v1) in front of them, and the EventBridge rule that drives
// purge.
//
// Every name the functions need reaches them through the environment
// variables listed in CONTRACTS.md; nothing here is hard-coded but the
// function names, which are derived from the stack name so that a worker can
// be allowed to invoke itself without a circular reference between the
// function and its role.
package stack
