package policy

import (
	"context"
	"strings"
	"testing"
)

// A Lambda built without the tag cel (nocel_build.go) runs policies whose
// rules have no condition and refuses one that has.
func TestWithoutCEL(t *testing.T) {
	newConditions = func(uint64) (conditionCompiler, error) { return noConditions{}, nil }
	t.Cleanup(func() { newConditions = buildConditions })

	p, err := compile(t, `{"version":1,"rules":[{"id":"no-deletes","tools":["delete_*"],"outcome":"deny"}]}`, Options{})
	if err != nil {
		t.Fatalf("a policy without conditions: %v", err)
	}
	if o := p.Evaluate(context.Background(), Call{Tool: "delete_document", Effect: "write"}, nil); o.Action != Deny || o.Rule != "no-deletes" {
		t.Errorf("delete_document: %+v, want denied by no-deletes", o)
	}
	_, err = compile(t, `{"version":1,"rules":[{"id":"big","tools":["*"],"when":"size(args) > 1","outcome":"deny"}]}`, Options{})
	if err == nil || !strings.Contains(err.Error(), `rules[0] "big": when:`) || !strings.Contains(err.Error(), "LAMBDA_FEATURES=cel") {
		t.Errorf("a rule with a condition: %v, want an error naming the rule and how to rebuild", err)
	}
}
