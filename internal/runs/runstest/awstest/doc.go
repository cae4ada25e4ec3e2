// Package awstest gives integration tests (//go:build integration) of the AWS
// adapters an isolated table and bucket on the emulator at AWS_ENDPOINT_URL
// (default http://localhost:4566: moto server or LocalStack), SDK clients
// that count round trips, and a fault injector for transient errors.
package awstest
