// Package openai is a loop.Model backed by OpenAI's Chat Completions API
// (github.com/openai/openai-go/v3) with function tools, and by servers that
// speak the same API (vLLM, Ollama, LiteLLM...) through Options.BaseURL.
//
// # Mapping
//
// To the API: the system text becomes the first message, role "system". An
// assistant message becomes one "assistant" message: its text (a string for
// one text block, text parts for several) and one "tool_calls" entry per
// tool_use block, with the same id, the name, and the input as the JSON
// "arguments" string. A user message becomes one "tool" message per
// tool_result block (same tool_call_id, in order, first, as the API wants
// them right after the assistant's calls) followed by a "user" message with
// its text, if any. Chat Completions has no error flag on tool results, so a
// result with is_error is sent as "Error: " followed by its content. Tool
// specs become function tools whose parameters are our JSON schema (each
// top-level keyword's value is sent byte for byte).
//
// From the API: the first choice's content becomes a text block; a refusal
// becomes a text block holding the refusal and stop reason refusal; each
// function tool call becomes a tool_use block with the call's id (such as
// "call_..."), so ids survive a suspension and a resume in another process.
// Arguments that are not JSON (some compatible servers emit such) are kept
// as a JSON string, which the loop's schema check then refuses, and are sent
// back verbatim. A tool call without an id gets "call_<completion id>_<n>".
// Finish reasons: stop maps to end_turn (or tool_use when the message holds
// tool calls, as Ollama reports "stop" then), tool_calls and function_call to
// tool_use, length to max_tokens, content_filter to refusal, anything else to
// other. Usage: prompt_tokens and completion_tokens.
//
// # Failures
//
// The SDK retries connection errors, 408, 409, 429 and 5xx with exponential
// backoff (honouring retry-after). A final failure is an error whose message
// names the provider, the HTTP status, the error code or type and the API's
// message, never the prompt; it wraps the SDK's *openai.Error.
package openai
