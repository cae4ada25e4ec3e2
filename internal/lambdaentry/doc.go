// Package lambdaentry is the single Lambda handler each agentgate function
// starts: it recognises the event (API Gateway proxy request, worker job,
// EventBridge scheduled event) and calls the matching handler.
package lambdaentry
