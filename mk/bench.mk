# Benchmarks beyond `make bench` (the go benchmarks, in the root Makefile).

.PHONY: bench-lambda

## bench-lambda: cold init and first-invoke time (median of BENCH_N, default 5) and size of each bootstrap under the Lambda RIE, next to a hello-world baseline
bench-lambda:
	scripts/bench-lambda.sh $(BENCH_N)

.PHONY: cost

## cost: SDK calls, DynamoDB write requests and units per phase of one whole cycle, and the cost per million cycles next to Step Functions (needs moto on $(AWS_ENDPOINT_URL): scripts/moto.sh start)
cost:
	$(GO) test -tags integration -count=1 -run '^TestCycleCosts$$' -v ./internal/app | sed -n 's/^ *cycle_integration_test.go:[0-9]*: //p'
