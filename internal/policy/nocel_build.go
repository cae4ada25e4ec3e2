//go:build !cel && (bedrock || openai || anthropic || scripted)

package policy

// buildConditions is the compiler of a Lambda build without the tag cel.
func buildConditions(uint64) (conditionCompiler, error) { return noConditions{}, nil }
