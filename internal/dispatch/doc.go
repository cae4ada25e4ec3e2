// Package dispatch holds the two ways a worker job (service.Job) leaves the
// process that decided it: Lambda, an asynchronous invoke of the worker
// function (InvocationType=Event) on AWS, and InProcess, a goroutine running
// the worker locally (agentgate serve, tests). Both satisfy
// service.Dispatcher; a lost dispatch is recovered by the sweep either way.
package dispatch
