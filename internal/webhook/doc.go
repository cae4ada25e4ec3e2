// Package webhook tells a run's caller what happened to the run, by signed
// HTTP POSTs that follow the Standard Webhooks specification
// (https://www.standardwebhooks.com).
//
// An Event names a run transition a caller cares about
// (run.waiting_for_approval, run.waiting_for_tool_results, run.completed,
// run.failed, run.cancelled, run.expired). NewDelivery renders it once into
// a Delivery: the exact body bytes and a webhook-id derived from the run and
// the occurrence, so every attempt — and a second scheduling of the same
// occurrence after a crash — carries the same id and body. Payloads are thin
// on purpose: the run id, status, reason, deadline and links, never prompts,
// tool arguments, tool results or approval tokens; a receiver that wants
// more calls GET /runs/{id} with its own credentials.
//
// A Signer signs each attempt (webhook-id, webhook-timestamp,
// webhook-signature: v1 HMAC-SHA256 with every configured whsec_ secret, so
// a receiver can rotate) through the reference library.
//
// A Sender makes one attempt through an SSRF-safe client: https only (plain
// http only when the Policy allows it, for the local server), no proxy, no
// redirects followed, short timeouts, at most MaxResponseBody bytes of the
// answer read. The target host is resolved by the Sender and every address
// is checked against the Policy, and checked again in the dialer's Control
// hook on the address actually connected to, so a DNS answer that changes
// between check and connect (rebinding) cannot reach an internal address.
// Loopback, private, link-local, CGNAT, multicast, unspecified, reserved,
// IPv4-mapped IPv6 and cloud metadata addresses are refused unless the
// deployment's allow-list names them; IP-literal hosts are refused unless
// allow-listed.
//
// The secrets come from a SignerSource: a fixed *Signer (the local
// server's --webhook-secret-file, see EnsureSecretFile) or a
// SecretsManagerSource that re-reads the secret named by
// AGENTGATE_WEBHOOK_SECRET every SecretRefresh (LoadConfig reads it and the
// allow-list AGENTGATE_WEBHOOK_ALLOW). A Sender whose secret cannot be read
// makes no attempt and says so with a SecretUnavailableError (the secret
// and why, never its value): that is not a failed attempt, and the caller
// tries again later without counting one.
//
// Delivery.Record folds an Attempt into the delivery and, per Schedule,
// decides the next attempt time: MaxAttempts attempts over less than 24
// hours with exponential backoff, then the delivery is given up. Attempts
// are meant to be audited; they carry the status code, latency and a short
// error class, never the secret, the body or the resolved addresses.
package webhook
