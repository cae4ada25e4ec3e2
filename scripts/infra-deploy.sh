#!/usr/bin/env bash
# Deploy the agentgate stack to the AWS account and region of your credentials
# with the pinned CDK CLI (`make deploy`, after `make build`).
#
#   MAIL_FROM=approvals@example.com SES_IDENTITY=example.com scripts/infra-deploy.sh
#
# Prerequisites: credentials for the target account (profile, SSO or keys),
# AWS_REGION, the account bootstrapped once for CDK
# (`cd infra && npx cdk bootstrap`), and SES_IDENTITY verified in SES in that
# region. INFRA_CDK_ARGS adds `cdk deploy` arguments, e.g.
#   INFRA_CDK_ARGS='-c model=bedrock:anthropic.claude-3-haiku-20240307-v1:0 -c tracing=true'
# (context keys: infra/config.go).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${MAIL_FROM:?set MAIL_FROM to the sender address of approval mails, e.g. approvals@example.com}"
: "${SES_IDENTITY:?set SES_IDENTITY to the verified SES identity of MAIL_FROM (its domain or the address)}"

export CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

if [ ! -x infra/node_modules/.bin/cdk ] || [ infra/package-lock.json -nt infra/node_modules/.package-lock.json ]; then
  (cd infra && npm ci --no-audit --no-fund --loglevel=error)
fi
# shellcheck disable=SC2086 # INFRA_CDK_ARGS is a list of arguments
(cd infra && node_modules/.bin/cdk deploy --all --require-approval broadening \
  --parameters "MailFrom=$MAIL_FROM" --parameters "SesIdentity=$SES_IDENTITY" \
  ${INFRA_CDK_ARGS:-})
