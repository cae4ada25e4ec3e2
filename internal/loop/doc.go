// Package loop is agentgate's agent tool loop: a provider-neutral transcript,
// the Model and Tool contracts, the approval trigger, and Run and Resume.
//
// The loop never executes a tool call that needs a human's approval until a
// decision arrives. Before any call of an assistant turn runs, the whole turn
// is checked; if any call needs approval, nothing of the turn runs and Run
// returns an Outcome of kind OutcomeSuspended carrying a SuspendedState. The
// state is plain JSON, so it can be stored anywhere and resumed in another
// process with Resume, which refuses a decision made on a different turn
// (turn digest), an unknown schema version, or a tool whose definition
// changed since the suspension.
//
// The package imports nothing from AWS; persistence observes the loop through
// Hooks and the Trace of steps in each Outcome.
package loop
