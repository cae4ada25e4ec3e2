// Package runstest is the one conformance suite every runs adapter pair
// (RowStore + StateStore) must pass: every transition and its refusals, with
// the run read back unchanged after each refusal; event ordering and paging;
// due-index queries; purge of a run's row, events, tokens and blobs; and
// races (50 concurrent deciders, 50 concurrent claimers, exactly one winner).
//
// An adapter's test calls Run with a constructor that gives each subtest a
// fresh, isolated Harness.
package runstest
