//go:build !race

package dynamo

const raceEnabled = false
