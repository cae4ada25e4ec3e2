// Package service is agentgate's application layer: the start request and
// its validation, the worker that runs and resumes runs on the loop while
// persisting every step, the worker job and the Dispatcher contract (the
// adapters are internal/dispatch), and the purge sweep.
// The Lambda functions and the local server call the same code.
package service
