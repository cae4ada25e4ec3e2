//go:build cel || !(bedrock || openai || anthropic || scripted)

package policy

import (
	"context"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

// CEL conditions are opt-in for the Lambdas, like the model providers and
// MCP tool sources: a build with a provider tag (bedrock, openai,
// anthropic, scripted) links cel-go only with the tag cel (`make build
// LAMBDA_FEATURES=cel`); a build without provider tags (the CLI, the tests)
// always does. Linking cel-go costs a function about 20 MB: besides its own
// 10 MB it calls methods through reflection, which makes the Go linker keep
// every exported method of every type. Without it a policy whose rules have
// no `when` condition still works (nocel.go).

// celConditions compiles `when` conditions in the one CEL environment.
type celConditions struct {
	env   *cel.Env
	limit uint64
}

// buildConditions returns the CEL compiler of `when` conditions with a
// cost limit per evaluation.
func buildConditions(limit uint64) (conditionCompiler, error) {
	env, err := cel.NewEnv(
		ext.NativeTypes(reflect.TypeOf(RunFacts{}), ext.ParseStructTags(true)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("effect", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("run", cel.ObjectType("policy.RunFacts")),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		cel.ParserExpressionSizeLimit(MaxConditionBytes),
	)
	return celConditions{env: env, limit: limit}, err
}

func (c celConditions) compile(src string) (condition, error) {
	if len(src) > MaxConditionBytes {
		return nil, fmt.Errorf("longer than %d bytes", MaxConditionBytes)
	}
	ast, iss := c.env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the condition is of type %s, want bool", t)
	}
	prg, err := c.env.Program(ast, cel.CostLimit(c.limit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	return celCondition{prg}, nil
}

// celCondition is a compiled CEL program.
type celCondition struct{ prg cel.Program }

func (c celCondition) eval(ctx context.Context, v *vars) (bool, error) {
	out, _, err := c.prg.ContextEval(ctx, v.m)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %s, want bool", out.Type().TypeName())
	}
	return bool(b), nil
}
