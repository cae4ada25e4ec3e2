#!/usr/bin/env bash
# LocalStack runs this once it is ready. It creates only what the agentgate
# stack does not: the verified SES sender the functions mail approvers from
# (the stack takes the sender as a parameter and never manages SES
# identities). Tables, buckets and functions come from the stack
# (`make deploy-local`) or, for the integration suite, from the tests
# themselves.
#
# Also usable against moto: AWS_ENDPOINT_URL=http://localhost:4566 localstack/init/ready.d/10-ses-sender.sh
set -euo pipefail
sender="${AGENTGATE_MAIL_FROM:-agentgate@example.com}"
if command -v awslocal >/dev/null; then
  awslocal ses verify-email-identity --email-address "$sender"
else
  aws --endpoint-url "${AWS_ENDPOINT_URL:-http://localhost:4566}" --region "${AWS_REGION:-us-east-1}" \
    ses verify-email-identity --email-address "$sender"
fi
echo "agentgate: SES sender $sender verified"
