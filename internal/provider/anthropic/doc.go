// Package anthropic is a loop.Model backed by Anthropic's Messages API
// (github.com/anthropics/anthropic-sdk-go/v2), with tools.
//
// # Mapping
//
// Our transcript maps one to one onto Messages: the system text becomes the
// "system" text block; user and assistant messages keep their role; text
// blocks become "text" blocks (empty ones are dropped, the API refuses them);
// tool_use blocks become "tool_use" blocks with the same id, name and input;
// tool_result blocks become "tool_result" blocks with the same tool_use_id,
// their content as one text block and is_error when set. Tool specs become
// custom tools whose input_schema is our JSON schema, byte for byte.
//
// From a response, "text" and "tool_use" blocks are kept (tool-use ids such as
// "toolu_01..." are stored as Block.ID, so they survive a suspension and a
// resume in another process); thinking and server-tool blocks, which we never
// ask for, are dropped. Stop reasons: end_turn, tool_use, max_tokens and
// refusal map to the loop's reasons of the same name,
// model_context_window_exceeded to max_tokens, anything else (stop_sequence,
// pause_turn) to other. Input tokens are input_tokens plus the cache creation
// and cache read input tokens (what the request consumed); output tokens are
// output_tokens.
//
// # Failures
//
// The SDK retries connection errors, 408, 409, 429 and 5xx with exponential
// backoff (honouring retry-after). A final failure is an error whose message
// names the provider, the HTTP status, the error type and the API's message,
// never the prompt; it wraps the SDK's *anthropic.Error.
//
// The API key is passed explicitly; the SDK's environment and profile lookup
// is switched off so the key comes from our configuration only.
package anthropic
