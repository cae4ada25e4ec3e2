// Package app wires agentgate's parts into one application: the run store,
// the builtin tools, the model, the worker, the API and the purge sweep. The
// Lambda mains and the local server build their App here and differ only in
// adapters (DynamoDB+S3+SES+Lambda, or bbolt+folders+in-process dispatch).
package app
