// Package approvalpage renders the HTML pages behind an approval link and
// parses the form they post.
//
// GET /approvals/{token} shows Confirm: what the run is for, each pending
// call with its arguments and preview, the deadline, and a form posting back
// to the same path with Approve, Deny (with an optional reason) and, when
// several calls need approval, per-call choices. Rendering never changes
// state, so mail scanners that pre-fetch links decide nothing. The POST body
// goes through ParseDecision into a loop.Decision; the outcome is shown with
// Decided, AlreadyDecided, NotFound, Expired or Problem.
//
// Every page function returns a status code and a complete HTML document,
// ready for an events.APIGatewayProxyResponse with the headers of Headers.
// Pages are written with approval.HTML, which escapes every value exactly
// as html/template would (the former templates are in testdata, and a test
// compares the bytes); inline CSS only and no JavaScript; SecurityHeaders' policy forbids scripts outright.
package approvalpage
