#!/usr/bin/env bash
# CI for the infrastructure (`make ci-infra`; called by .ci/run after the unit
# and integration tests). On a fresh machine it:
#   1. installs the pinned CDK CLIs under infra/ (npm ci: aws-cdk 2.1148.1,
#      aws-cdk-local 3.0.4);
#   2. builds the function zips (`make build`);
#   3. synthesizes the stack offline (production settings), which runs the
#      cdk-nag packs (AwsSolutions, Serverless, NIST 800-53 R5) and fails on
#      a finding infra/stack/nag.go neither fixes nor accepts; prints the
#      packs' report counts; runs the CDK assertion tests (`go test ./...`);
#   4. starts moto on :4566 (a no-op when an emulator already answers),
#      deploys the synthesized stack with cdklocal (bootstrap, then a direct
#      create) and checks table, bucket, functions, REST API and rule through
#      the AWS APIs (infra/cmd/checkdeploy);
#   5. runs the RIE end-to-end test against the deployed table and bucket
#      (AGENTGATE_E2E_TABLE / AGENTGATE_E2E_BUCKET), the Lambda code under
#      the Runtime Interface Emulator;
#   6. deletes the stack and prints the synth and deploy times in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true
export INFRA_STACK="${INFRA_STACK:-Agentgate}"

now() { date +%s.%N; }
secs() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", e - s }'; }
t_all=$(now)

echo "== infra: npm ci (pinned aws-cdk, aws-cdk-local)"
(cd infra && npm ci --no-audit --no-fund --loglevel=error)
(cd infra && node_modules/.bin/cdklocal --version)

echo "== infra: make build"
t=$(now); make --no-print-directory build; build_s=$(secs "$t" "$(now)")

echo "== infra: synth (production settings)"
t=$(now); scripts/infra-synth.sh infra/cdk.out; synth_s=$(secs "$t" "$(now)")
python3 - infra/cdk.out/"$INFRA_STACK".template.json <<'EOF'
import collections, json, sys
t = json.load(open(sys.argv[1]))
counts = collections.Counter(r["Type"] for r in t["Resources"].values())
print("synth: %d resources: %s" % (sum(counts.values()), ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
EOF

python3 - infra/cdk.out "$INFRA_STACK" <<'EOF'
import collections, csv, glob, os, sys
out, stack = sys.argv[1], sys.argv[2]
reports = sorted(glob.glob(os.path.join(out, "*--%s-NagReport.csv" % stack)))
if len(reports) != 3:
    sys.exit("cdk-nag: want 3 reports in %s, found %d" % (out, len(reports)))
for path in reports:
    rows = list(csv.DictReader(open(path)))
    c = collections.Counter(r["Compliance"] for r in rows)
    print("cdk-nag %s: %d compliant, %d accepted (suppressed with a reason), %d unaccepted" % (
        os.path.basename(path).split("--")[0], c["Compliant"], c["Suppressed"], c["Non-Compliant"]))
    if c["Non-Compliant"]:
        sys.exit("cdk-nag: unaccepted findings in " + path)
EOF

echo "== infra: vet and gofmt (the root lint skips infra/)"
(cd infra && go vet ./...)
unformatted=$(gofmt -l $(git ls-files 'infra/*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi

echo "== infra: CDK assertion tests"
t=$(now); (cd infra && go test -count=1 ./...); test_s=$(secs "$t" "$(now)")

echo "== infra: deploy onto moto at $AWS_ENDPOINT_URL"
scripts/moto.sh start
trap 'scripts/moto.sh stop' EXIT
t=$(now); scripts/infra-local.sh deploy; deploy_total_s=$(secs "$t" "$(now)")
deploy_s=$(cat infra/cdk.out/local/deploy.seconds) bootstrap_s=$(cat infra/cdk.out/local/bootstrap.seconds)

outputs=infra/cdk.out/local/outputs.json
output() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])' "$outputs" "$INFRA_STACK" "$1"; }
echo "== infra: Lambda code under RIE against the deployed table and bucket"
AGENTGATE_E2E_TABLE=$(output TableName) AGENTGATE_E2E_BUCKET=$(output BucketName) \
  go test -count=1 -tags integration -run TestLambdasUnderRIE ./cmd/agentgate

echo "== infra: destroy"
t=$(now); scripts/infra-local.sh destroy >/dev/null; destroy_s=$(secs "$t" "$(now)")

echo "infra timings (s): synth $synth_s, deploy onto moto $deploy_s (cdklocal deploy; bootstrap before it $bootstrap_s)"
echo "infra timings (s): build $build_s, CDK tests $test_s, local synth + deploy + checks $deploy_total_s, destroy $destroy_s, total $(secs "$t_all" "$(now)")"
