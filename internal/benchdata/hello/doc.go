// Command hello is a benchmark baseline, not part of agentgate: the smallest
// aws-lambda-go function, built exactly like the real bootstraps, so that
// scripts/bench-lambda.sh can put their init time, first-invoke time and
// binary size next to what the Lambda runtime library alone costs.
package main
