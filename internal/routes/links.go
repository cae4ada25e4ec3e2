package routes

// RunLinks returns a run's API links, paths relative to the API's base URL,
// as run responses and webhook payloads carry them. It is here, with the
// routes, rather than in the API handler so that the purge function, which
// schedules webhooks but serves no API, need not link the handler.
func RunLinks(id string) map[string]string {
	return map[string]string{
		"self":     "/runs/" + id,
		"events":   "/runs/" + id + "/events",
		"decision": "/runs/" + id + "/decision",
		"cancel":   "/runs/" + id + "/cancel",
		// tool_results: where the results of handed-over client calls go.
		"tool_results": "/runs/" + id + "/tool-results",
	}
}
