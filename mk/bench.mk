# Benchmarks beyond `make bench` (the go benchmarks, in the root Makefile).

.PHONY: bench-lambda

## bench-lambda: cold init and first-invoke time (median of BENCH_N, default 5) and size of each bootstrap under the Lambda RIE, next to a hello-world baseline
bench-lambda:
	scripts/bench-lambda.sh $(BENCH_N)
