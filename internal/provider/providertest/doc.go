// Package providertest holds what the provider packages' tests share: an
// httptest server that replays recorded wire responses in order and records
// the requests it receives, golden-file comparison of request bodies (rewrite
// with `go test ./internal/provider/... -update`), and the provider-neutral
// requests every provider is tested with.
//
// It is imported by tests only; it makes no network calls beyond loopback.
package providertest
