#!/usr/bin/env bash
# The agentgate stack on a local AWS emulator (moto server or LocalStack) on
# AWS_ENDPOINT_URL (default http://localhost:4566).
#
#   scripts/infra-local.sh up        # LocalStack (or moto: EMULATOR=moto) with Docker, else moto_server
#   scripts/infra-local.sh down      # stop what `up` started
#   scripts/infra-local.sh deploy    # synth (local settings), cdklocal bootstrap + deploy, check
#   scripts/infra-local.sh context   # print the CDK context `deploy` would synthesize with
#   scripts/infra-local.sh destroy   # delete the stack
#
# Settings (environment): INFRA_STACK (default Agentgate), MAIL_FROM and
# SES_IDENTITY (defaults agentgate@example.com, example.com), INFRA_CONTEXT_JSON
# (extra CDK context merged over the local defaults), INFRA_OUTDIR (default
# infra/cdk.out/local), EMULATOR (localstack or moto, for `up` with Docker),
# INFRA_ARCH (arm64 or x86_64: the functions' architecture on LocalStack;
# default the Docker host's).
#
# The local defaults are deletionProtection=false and stackName; on
# LocalStack, which runs the functions, also:
# - sesApi=v1: the functions mail through SES's first API
#   (AGENTGATE_SES_API=v1), as LocalStack Community has no SES v2;
#   INFRA_CONTEXT_JSON='{"sesApi":"v2"}' overrides it (a Pro image);
# - architecture: the Docker host's (x86_64 on amd64, arm64 on arm64), as
#   LocalStack runs each function in a container of the function's
#   architecture, and an arm64 bootstrap on an x86 host without qemu fails
#   with "exec format error"; `make build` builds both (dist/lambda/{arm64,amd64});
# - publicBaseUrl: LocalStack's URL of the stage, so the approval links in
#   mail reach its API: http://{apiId}.execute-api.localhost.localstack.cloud:<port>/{stage}
#   (the stack fills in the REST API's id and the stage), or, when
#   AWS_ENDPOINT_URL names a host other than localhost,
#   http://<host>:<port>/restapis/{apiId}/{stage}/_user_request_.
# On moto, which cannot run the functions, the stack keeps its arm64
# functions and the AWS stage URL.
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
# compose: a Compose v2 client. docker-compose 1.x (compose_v1, its
# version) cannot run localstack/docker-compose.yml: it refuses the file's
# top-level `name` and has no `up --wait`.
compose=() compose_v1=
if docker compose version >/dev/null 2>&1; then compose=(docker compose -f localstack/docker-compose.yml)
elif command -v docker-compose >/dev/null; then
  v=$(docker-compose version --short 2>/dev/null || true)
  case "$v" in
  1.*) compose_v1="$v" ;;
  *) compose=(docker-compose -f localstack/docker-compose.yml) ;;
  esac
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

# host_arch: the functions' architecture on LocalStack: INFRA_ARCH, else
# the Docker engine's (LocalStack starts the functions' containers there),
# else this machine's.
host_arch() {
  local a="${INFRA_ARCH:-}"
  [ -n "$a" ] || a=$(docker info --format '{{.Architecture}}' 2>/dev/null || true)
  [ -n "$a" ] || a=$(uname -m)
  case "$a" in
  x86_64 | amd64) echo x86_64 ;;
  arm64 | aarch64) echo arm64 ;;
  *) echo "infra-local: no Lambda architecture for host architecture \"$a\"; set INFRA_ARCH=arm64 or INFRA_ARCH=x86_64" >&2; return 1 ;;
  esac
}

# local_context prints the CDK context of a deploy onto emulator $1.
local_context() {
  local arch=
  # (|| return: command substitutions do not inherit set -e.)
  if [ "$1" = localstack ]; then arch=$(host_arch) || return 1; fi
  python3 -c 'import json, sys, urllib.parse
stack, extra, kind, arch, endpoint = sys.argv[1:6]
ctx = {"deletionProtection": "false", "stackName": stack}
if kind == "localstack":
    ctx["sesApi"] = "v1"  # LocalStack Community has SES, not SES v2
    ctx["architecture"] = arch  # LocalStack runs the functions on the Docker host
    u = urllib.parse.urlsplit(endpoint)
    port = u.port or 4566
    if u.hostname == "localhost":
        base = "%s://{apiId}.execute-api.localhost.localstack.cloud:%d/{stage}" % (u.scheme, port)
    else:
        base = "%s://%s/restapis/{apiId}/{stage}/_user_request_" % (u.scheme, u.netloc)
    ctx["publicBaseUrl"] = base  # the stack fills in the REST API id and stage
ctx.update(json.loads(extra or "{}"))
print(json.dumps(ctx))' "$stack" "${INFRA_CONTEXT_JSON:-}" "$1" "$arch" "$endpoint"
}

# context_value prints key of the JSON context $1, or $3 when unset.
context_value() {
  python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2]) or sys.argv[3])' "$1" "$2" "$3"
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
  if [ -n "$compose_v1" ] && docker info >/dev/null 2>&1; then
    echo "infra-local: docker-compose $compose_v1 cannot run localstack/docker-compose.yml (its top-level \`name\` and \`up --wait\` need Compose v2);" \
      "install the Compose v2 plugin (\`docker compose\`), or run moto without Docker: scripts/moto.sh start" >&2
    exit 1
  fi
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
context)
  require_emulator
  local_context "$kind"
  ;;
deploy)
  require_emulator
  context=$(local_context "$kind") || exit 1
  echo "infra-local: context $context"
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
  # ApiUrl is AWS's form of the stage URL (https://<id>.execute-api...);
  # the base of the approval links is LocalStack's (publicBaseUrl).
  python3 -c 'import json, sys
ctx = json.loads(sys.argv[3])
base = ctx.get("publicBaseUrl")
if base:
    api = json.load(open(sys.argv[1]))[sys.argv[2]]["ApiUrl"].split("//", 1)[1].split(".", 1)[0]
    print("infra-local: API stage and approval links at " + base.replace("{apiId}", api).replace("{stage}", ctx.get("stageName") or "v1"))' \
    "$outdir/outputs.json" "$stack" "$context"
  (cd infra && go run ./cmd/checkdeploy -stack "$stack" \
    -architecture "$(context_value "$context" architecture arm64)" -stage "$(context_value "$context" stageName v1)")
  ;;
destroy)
  require_emulator
  if ! stack_exists "$stack"; then echo "infra-local: no stack $stack on $endpoint"; exit 0; fi
  if [ ! -f "$outdir/manifest.json" ]; then
    INFRA_CONTEXT_JSON="{\"deletionProtection\":\"false\",\"stackName\":\"$stack\"}" scripts/infra-synth.sh "$outdir"
  fi
  delete_stack
  ;;
*) echo "usage: $0 up|down|deploy|context|destroy" >&2; exit 2 ;;
esac
