package policy

import "fmt"

// noConditions is the condition compiler of a build without cel-go (see
// cel.go): a policy whose rules have no `when` condition works; a rule
// with one cannot be compiled, and the error says how to rebuild.
type noConditions struct{}

func (noConditions) compile(string) (condition, error) {
	return nil, fmt.Errorf("this function was built without CEL and refuses the policy rather than ignore the rule (rebuild with `make build LAMBDA_FEATURES=cel`, i.e. -tags cel)")
}
