#!/usr/bin/env bash
# Synthesize the agentgate stack into a cloud assembly, offline and without
# the CDK CLI: the Go app (infra/main.go) writes the assembly to CDK_OUTDIR.
#
#   scripts/infra-synth.sh [OUTDIR]          # default infra/cdk.out
#
# INFRA_CONTEXT_JSON passes CDK context (see infra/config.go), e.g.
#   INFRA_CONTEXT_JSON='{"deletionProtection":"false","stackName":"AgentgateDev"}'
# The function zips must exist (`make build`).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-infra/cdk.out}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
context="${INFRA_CONTEXT_JSON:-}"
[ -n "$context" ] || context='{}'

arch_dir=arm64
case "$context" in *'"architecture"'*'"x86_64"'*) arch_dir=amd64 ;; esac
for fn in startrun resume purge; do
  if [ ! -f "dist/lambda/$arch_dir/$fn.zip" ] && [[ "$context" != *'"assetDir"'* ]]; then
    echo "synth: dist/lambda/$arch_dir/$fn.zip is missing: run \`make build\` first" >&2
    exit 1
  fi
done

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="${JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION:-20}"
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s.%N)
(cd infra && CDK_OUTDIR="$out" CDK_CONTEXT_JSON="$context" go run .)
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
echo "synth: wrote $out in ${secs} s"
