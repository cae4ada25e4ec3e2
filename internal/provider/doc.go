// Package provider chooses and builds the loop.Model a model spec names:
//
//	scripted:<file>       a deterministic script (package scripted)
//	bedrock:<model-id>    Amazon Bedrock Converse (package bedrock), IAM auth from the aws.Config
//	openai:<model>        OpenAI Chat Completions or a compatible server (package openai)
//	anthropic:<model>     Anthropic Messages (package anthropic)
//
// The spec comes from AGENTGATE_MODEL; one model is built per process. A run
// that names its own model (an id AGENTGATE_ALLOWED_MODELS allows) passes it
// as loop.ModelRequest.Model, which the configured provider uses in place of
// its default model id. The rest of
// the configuration is read once from the environment into Config by
// LoadConfig: the base URL of an OpenAI-compatible server, and each API key
// either from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY) or from AWS
// Secrets Manager (AGENTGATE_OPENAI_API_KEY_SECRET,
// AGENTGATE_ANTHROPIC_API_KEY_SECRET: a secret id or ARN whose SecretString
// is the key, or a JSON object with an "api_key" field).
//
// Keys are never logged: Config formats and logs with the keys redacted, and
// no error carries a key. Bedrock and Secrets Manager clients are built from
// the aws.Config the caller passes in Deps, loaded once outside any handler.
package provider
