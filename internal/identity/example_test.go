package identity_test

import (
	"fmt"

	"github.com/agentgate/agentgate/internal/identity"
)

func ExampleDirectory_MayDecide() {
	dir, err := identity.DecodeDirectory([]byte(`{"version": 1,
		"persons": [
			{"id": "ann", "aliases": ["ann@example.com", "arn:aws:iam::123456789012:user/ann"]},
			{"id": "bob", "aliases": ["bob@example.com"]}],
		"groups": [{"name": "ops", "members": ["ann", "bob"]}]}`))
	if err != nil {
		panic(err)
	}
	approvers, err := dir.RunApprovers([]string{"group:ops"})
	if err != nil {
		panic(err)
	}
	initiator := identity.MustParse("arn:aws:iam::123456789012:user/ann")
	call := identity.Requirement{Tool: "write_document", Approvers: approvers, FourEyes: true}
	for _, who := range []string{"Ann+me@Example.com", "bob@example.com"} {
		fmt.Printf("%s: %v\n", who, dir.MayDecide(identity.MustParse(who), initiator, call))
	}
	// Output:
	// Ann+me@Example.com: four-eyes: Ann+me@example.com (person ann) started this run and cannot decide it; another person must
	// bob@example.com: <nil>
}
