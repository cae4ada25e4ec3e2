// Package bedrock is a loop.Model backed by Amazon Bedrock's Converse API
// (aws-sdk-go-v2 service/bedrockruntime) with a toolConfig. On AWS it
// authenticates with the caller's aws.Config, normally the Lambda role.
//
// # Mapping
//
// To Converse: the system text becomes one "system" text block; user and
// assistant messages keep their role; text blocks become "text" blocks (empty
// ones are dropped, Converse refuses them); tool_use blocks become "toolUse"
// blocks with the same toolUseId, name and input; tool_result blocks become
// "toolResult" blocks with the same toolUseId and their content as one text
// block, and status "error" when is_error is set. Only some model families
// accept that status field (Anthropic Claude and Amazon Nova); for the others
// (see ToolResultStatus) an error result is sent as "Error: " followed by its
// content instead. Tool specs become "toolSpec" entries whose inputSchema.json
// is our JSON schema (numbers kept as written; object keys are sorted by the
// SDK's document encoder).
//
// From Converse: "text" and "toolUse" blocks of the output message are kept
// (tool-use ids such as "tooluse_..." are stored as Block.ID, so they survive
// a suspension and a resume in another process); reasoning and other blocks,
// which we never ask for, are dropped. Stop reasons: end_turn, tool_use and
// max_tokens map to the loop's reasons of the same name,
// model_context_window_exceeded to max_tokens, guardrail_intervened and
// content_filtered to refusal, anything else (stop_sequence,
// malformed_model_output, malformed_tool_use) to other. Input tokens are
// inputTokens plus the cache read and cache write input tokens; output tokens
// are outputTokens.
//
// # Failures
//
// The SDK's standard retryer retries throttling (ThrottlingException, 429),
// 5xx and transient connection errors with exponential backoff. A final
// failure is an error whose message names the provider, the error code and
// the service's message, never the prompt; it wraps the SDK error, so
// smithy.APIError is reachable with errors.As.
package bedrock
