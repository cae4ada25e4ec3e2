// Package httpapi is agentgate's REST API as API Gateway (REST, v1 payload)
// Lambda proxy handlers: POST /runs on the startrun function; the run's
// reads (GET /runs/{id}, its events and the whole of a held call), its
// decision, cancel and tool results, the approver's inbox (GET /approvals)
// and the approval-link pages on the resume function. Which routes an API
// serves, and their body limits, come from the route table
// (internal/routes), the one list of them. The approval-link routes render their pages with
// internal/approvalpage and hash link tokens with internal/approval. The
// local server calls the same handlers after adapting HTTP requests to
// proxy events.
//
// Errors are JSON {"error":{"code","message"}}; codes map to statuses in one
// table (statusOf); anything unexpected is "internal error" to the caller and
// detail in the log.
package httpapi
