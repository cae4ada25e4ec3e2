//go:build race

package dynamo

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// is put back, at random.
const raceEnabled = true
