#!/usr/bin/env bash
# The agentgate stack on a local AWS emulator (moto server or LocalStack) on
# AWS_ENDPOINT_URL (default http://localhost:4566).
#
#   scripts/infra-local.sh up        # LocalStack (or moto: EMULATOR=moto) with Docker, else moto_server
#   scripts/infra-local.sh down      # stop what `up` started
#   scripts/infra-local.sh deploy    # synth (local settings), cdklocal bootstrap + deploy, check
#   scripts/infra-local.sh destroy   # delete the stack
#
# Settings (environment): INFRA_STACK (default Agentgate), MAIL_FROM and
# SES_IDENTITY (defaults agentgate@example.com, example.com), INFRA_CONTEXT_JSON
# (extra CDK context merged over the local defaults), INFRA_OUTDIR (default
# infra/cdk.out/local), EMULATOR (localstack or moto, for `up` with Docker).
#
# On LocalStack the local defaults include sesApi=v1: the functions mail
# through SES's first API (AGENTGATE_SES_API=v1), as LocalStack Community has
# no SES v2. INFRA_CONTEXT_JSON='{"sesApi":"v2"}' overrides it (a Pro image).
#
# moto applies CloudFormation stacks it creates but fails stack updates, so
# on moto an existing stack is deleted before it is deployed again. The deploy
# uses `--method=direct` (CreateStack): moto executes change sets without
# honouring DependsOn, which fails the API deployment ("The REST API doesn't
# contain any methods"). cdklocal needs the endpoint host `localhost`.
set -euo pipefail
cd "$(dirname "$0")/.."

endpoint="${AWS_ENDPOINT_URL:-http://localhost:4566}"
endpoint="${endpoint/127.0.0.1/localhost}"
export AWS_ENDPOINT_URL="$endpoint" AWS_ENDPOINT_URL_S3="$endpoint"
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-${AWS_REGION:-us-east-1}}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
# cdklocal drops AWS_* variables it is not told to keep.
export AWS_ENVAR_ALLOWLIST="${AWS_ENVAR_ALLOWLIST:-AWS_REGION,AWS_DEFAULT_REGION,AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY}"
export CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

stack="${INFRA_STACK:-Agentgate}"
mail_from="${MAIL_FROM:-agentgate@example.com}"
ses_identity="${SES_IDENTITY:-example.com}"
outdir="${INFRA_OUTDIR:-$PWD/infra/cdk.out/local}"
compose=()
if docker compose version >/dev/null 2>&1; then compose=(docker compose -f localstack/docker-compose.yml)
elif command -v docker-compose >/dev/null; then compose=(docker-compose -f localstack/docker-compose.yml)
fi

emulator() {
  if curl -fsS -o /dev/null --max-time 3 "$endpoint/_localstack/health" 2>/dev/null; then echo localstack
  elif curl -fsS -o /dev/null --max-time 3 "$endpoint/moto-api/" 2>/dev/null; then echo moto
  else echo none; fi
}

# docker_works: a Docker engine answers and a compose client exists.
docker_works() { [ ${#compose[@]} -gt 0 ] && docker info >/dev/null 2>&1; }

cdklocal() {
  if [ ! -x infra/node_modules/.bin/cdklocal ] || [ infra/package-lock.json -nt infra/node_modules/.package-lock.json ]; then
    (cd infra && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # The AWS SDK for JavaScript warns about Node.js 20 on every run.
  (cd infra && NODE_NO_WARNINGS=1 node_modules/.bin/cdklocal "$@" --no-notices)
}

# endpoint_port: the port of AWS_ENDPOINT_URL (4566 when it names none).
endpoint_port() { local p="${endpoint##*:}"; p="${p%%/*}"; [[ "$p" =~ ^[0-9]+$ ]] && echo "$p" || echo 4566; }

aws_local() { aws --endpoint-url "$endpoint" "$@"; }

stack_exists() { aws_local cloudformation describe-stacks --stack-name "$1" >/dev/null 2>&1; }

# empty_bucket deletes every object version and delete marker, so that
# CloudFormation can delete the (versioned) bucket with the stack.
empty_bucket() {
  local page objects
  while :; do
    page=$(aws_local s3api list-object-versions --bucket "$1" --max-items 1000 --output json)
    objects=$(python3 -c 'import json, sys
d = json.loads(sys.stdin.read() or "{}")
o = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in (d.get("Versions") or []) + (d.get("DeleteMarkers") or [])]
print(json.dumps({"Objects": o, "Quiet": True}) if o else "")' <<<"$page")
    [ -n "$objects" ] || return 0
    aws_local s3api delete-objects --bucket "$1" --delete "$objects" >/dev/null
  done
}

# delete_stack empties the stack's bucket and deletes the stack.
delete_stack() {
  local bucket
  bucket=$(aws_local cloudformation describe-stacks --stack-name "$stack" \
    --query "Stacks[0].Outputs[?OutputKey=='BucketName'].OutputValue" --output text)
  if [ -n "$bucket" ] && [ "$bucket" != None ]; then empty_bucket "$bucket"; fi
  cdklocal destroy --app "$outdir" --force "$stack"
}

elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

require_emulator() {
  kind=$(emulator)
  if [ "$kind" = none ]; then
    echo "infra-local: no emulator answers on $endpoint; start one with \`make localstack-up\`" >&2
    exit 1
  fi
}

case "${1:-}" in
up)
  if docker_works; then
    service="${EMULATOR:-localstack}"
    profile=()
    [ "$service" = moto ] && profile=(--profile moto)
    "${compose[@]}" "${profile[@]}" up -d --wait "$service"
    echo "infra-local: $service (Docker) on :4566"
  else
    echo "infra-local: no Docker engine (or no compose client); starting moto_server instead"
    MOTO_PORT="${MOTO_PORT:-$(endpoint_port)}" scripts/moto.sh start
  fi ;;
down)
  if docker_works && [ -n "$("${compose[@]}" --profile moto ps -q 2>/dev/null)" ]; then
    "${compose[@]}" --profile moto down
  else
    MOTO_PORT="${MOTO_PORT:-$(endpoint_port)}" scripts/moto.sh stop
  fi ;;
deploy)
  require_emulator
  context=$(python3 -c 'import json, sys
ctx = {"deletionProtection": "false", "stackName": sys.argv[1]}
if sys.argv[3] == "localstack":
    ctx["sesApi"] = "v1"  # LocalStack Community has SES, not SES v2
ctx.update(json.loads(sys.argv[2] or "{}"))
print(json.dumps(ctx))' "$stack" "${INFRA_CONTEXT_JSON:-}" "$kind")
  INFRA_CONTEXT_JSON="$context" scripts/infra-synth.sh "$outdir"

  start=$(date +%s.%N)
  if ! stack_exists CDKToolkit; then
    echo "infra-local: cdklocal bootstrap ($kind)"
    cdklocal bootstrap --app "$outdir" >"$outdir/bootstrap.log" 2>&1 || { cat "$outdir/bootstrap.log" >&2; exit 1; }
  fi
  elapsed "$start" >"$outdir/bootstrap.seconds"
  start=$(date +%s.%N)
  if [ "$kind" = moto ] && stack_exists "$stack"; then
    echo "infra-local: moto cannot update stacks; deleting $stack first"
    delete_stack >"$outdir/destroy.log" 2>&1 || { cat "$outdir/destroy.log" >&2; exit 1; }
  fi
  echo "infra-local: cdklocal deploy $stack onto $kind at $endpoint"
  cdklocal deploy --app "$outdir" --method=direct --require-approval never \
    --parameters "MailFrom=$mail_from" --parameters "SesIdentity=$ses_identity" \
    --outputs-file "$outdir/outputs.json" "$stack" >"$outdir/deploy.log" 2>&1 || { cat "$outdir/deploy.log" >&2; exit 1; }
  elapsed "$start" >"$outdir/deploy.seconds"
  echo "infra-local: deployed $stack in $(cat "$outdir/deploy.seconds") s (bootstrap $(cat "$outdir/bootstrap.seconds") s); outputs in $outdir/outputs.json"
  # The emulators refuse mail from an unverified sender; the stack does not
  # manage SES identities (a real account verifies its domain once).
  aws_local ses verify-email-identity --email-address "$mail_from" >/dev/null
  python3 -c 'import json, sys
for stack, outs in json.load(open(sys.argv[1])).items():
    for k, v in sorted(outs.items()):
        print(f"  {k} = {v}")' "$outdir/outputs.json"
  (cd infra && go run ./cmd/checkdeploy -stack "$stack")
  ;;
destroy)
  require_emulator
  if ! stack_exists "$stack"; then echo "infra-local: no stack $stack on $endpoint"; exit 0; fi
  if [ ! -f "$outdir/manifest.json" ]; then
    INFRA_CONTEXT_JSON="{\"deletionProtection\":\"false\",\"stackName\":\"$stack\"}" scripts/infra-synth.sh "$outdir"
  fi
  delete_stack
  ;;
*) echo "usage: $0 up|down|deploy|destroy" >&2; exit 2 ;;
esac
