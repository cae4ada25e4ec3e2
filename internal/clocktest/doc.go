// Package clocktest is the one fake clock of agentgate's tests: a clock
// that stands still until the test moves it, so that no test depends on
// wall-clock time. Pass Clock.Now wherever the code takes a clock
// (runs.Options.Now, service.Worker.Now, app.LocalOptions.Now, ...).
// Deadline is its context counterpart: a deadline that passes when the test
// says so.
package clocktest
