// Package scripted is a deterministic loop.Model that replays a JSON script of
// assistant turns. It is for demos, tests and the local binary: no network,
// no keys, the same answers every time.
//
// The model is stateless across processes. The turn it plays is chosen by
// counting the assistant messages already in the request: with no assistant
// message so far it plays turn 0, after one it plays turn 1, and so on. A run
// suspended in one process and resumed in another, from a decoded
// SuspendedState, therefore continues the script where it left off.
//
// # Script format
//
// A script is one JSON object with a "turns" array; each turn is one assistant
// message:
//
//	{
//	  "turns": [
//	    {
//	      "content": [
//	        {"type": "text", "text": "Let me look."},
//	        {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.txt"}}
//	      ],
//	      "stop_reason": "tool_use",
//	      "usage": {"input_tokens": 120, "output_tokens": 30}
//	    },
//	    {
//	      "content": [{"type": "text", "text": "Done."}],
//	      "stop_reason": "end_turn"
//	    }
//	  ]
//	}
//
// "content" holds blocks exactly as loop.Block encodes them in JSON (text and
// tool_use; a tool_result block in an assistant turn is refused). Tool-use ids
// should be unique across the script; they are played back verbatim.
//
// "stop_reason" is one of the loop.StopReason values ("end_turn", "tool_use",
// "max_tokens", "refusal", "other"). When absent it is "tool_use" if the turn
// holds a tool_use block and "end_turn" otherwise.
//
// "usage" is optional. When absent, tokens are estimated deterministically:
// input tokens are the byte length of the JSON-encoded request (system,
// messages and tools) divided by 4, output tokens the byte length of the
// JSON-encoded turn content divided by 4, each at least 1.
//
// Asked for a turn past the end of the script, Generate returns an error
// saying the script ended (the loop then ends the run as provider_failed).
package scripted
