package policy_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/internal/policy"
)

func ExamplePolicy_Evaluate() {
	f, err := policy.DecodeFile([]byte(`{"version": 1, "rules": [
		{"id": "drafts", "tools": ["write_document"], "when": "args.path.startsWith('drafts/')", "outcome": "allow"},
		{"id": "no-prod", "tools": ["delete_document"], "when": "args.path.startsWith('prod/')",
		 "outcome": "deny", "message": "production documents are never deleted by an agent"}]}`))
	if err != nil {
		panic(err)
	}
	p, err := policy.Compile(f, policy.Options{})
	if err != nil {
		panic(err) // a broken policy stops start-up
	}
	for _, c := range []policy.Call{
		{Tool: "write_document", NeedsApproval: true, Args: json.RawMessage(`{"path":"drafts/a.md"}`)},
		{Tool: "write_document", NeedsApproval: true, Args: json.RawMessage(`{"path":"pages/a.md"}`)},
		{Tool: "delete_document", NeedsApproval: true, Args: json.RawMessage(`{"path":"prod/a.md"}`)},
	} {
		o := p.Evaluate(context.Background(), c, nil)
		fmt.Printf("%s by rule %s %q\n", o.Action, o.Rule, o.Message)
	}
	// Output:
	// allow by rule drafts ""
	// require_approval by rule default ""
	// deny by rule no-prod "production documents are never deleted by an agent"
}
