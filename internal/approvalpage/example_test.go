package approvalpage_test

import (
	"fmt"
	"net/url"

	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/runs"
)

// A POST /approvals/{token} handler parses the form against the run's
// pending calls and shows a Problem page for bad input.
func ExampleParseDecision() {
	pending := []runs.CallSummary{
		{ID: "toolu_1", Tool: "write_document", NeedsApproval: true},
		{ID: "toolu_2", Tool: "send_email", NeedsApproval: true},
	}
	form, _ := url.ParseQuery("digest=" + digest + "&action=per_call&call.toolu_1=approve&call.toolu_2=deny&reason.toolu_2=not+today")
	d, err := approvalpage.ParseDecision(form, pending)
	if err != nil {
		status, _ := approvalpage.Problem(400, runs.ErrorMessage(err))
		fmt.Println(status)
		return
	}
	for _, c := range d.Calls {
		fmt.Printf("%s %s %q\n", c.CallID, c.Action, c.Message)
	}

	_, err = approvalpage.ParseDecision(url.Values{"digest": {digest}, "action": {"edit"}}, pending)
	fmt.Println(runs.ErrorMessage(err))
	// Output:
	// toolu_1 approve ""
	// toolu_2 deny "not today"
	// edits are only possible through the API (POST /runs/{id}/decision, or agentgate runs decide --call ID=edit:@file.json)
}
