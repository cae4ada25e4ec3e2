# Infrastructure (infra/, its own Go module): the CDK stack, its tests, and
# deploys onto a local emulator or a real AWS account. See localstack/README.md.
#
# Settings (environment or make variables): INFRA_STACK (default Agentgate),
# MAIL_FROM and SES_IDENTITY (the SES sender; required by `deploy`),
# INFRA_CONTEXT_JSON (CDK context for synth and deploy-local, see
# infra/config.go), INFRA_ARCH (the functions' architecture on LocalStack,
# default the Docker host's), INFRA_CDK_ARGS (extra `cdk deploy` arguments for `deploy`,
# e.g. "-c model=bedrock:... -c modelArns=arn:...").
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
export CDK_DISABLE_CLI_TELEMETRY ?= true

.PHONY: synth infra-test deploy-local destroy-local localstack-up localstack-down deploy ci-infra

## synth: the stack's CloudFormation template, assets and cdk-nag reports in infra/cdk.out, offline (needs `make build`; fails on an unaccepted cdk-nag finding)
synth:
	scripts/infra-synth.sh infra/cdk.out

## infra-test: CDK assertion tests (resources, properties, IAM statement by statement, cdk-nag packs) and checker tests
infra-test:
	cd infra && $(GO) test -count=1 ./...

## localstack-up: LocalStack 4.14.0 (EMULATOR=moto: moto) with Docker, else moto_server, on :4566
localstack-up:
	scripts/infra-local.sh up

## localstack-down: stop the emulator localstack-up started
localstack-down:
	scripts/infra-local.sh down

## deploy-local: build, synth, cdklocal bootstrap + deploy onto $(AWS_ENDPOINT_URL), then check every resource (LocalStack: the Docker host's architecture, links to its API URL)
deploy-local: build
	scripts/infra-local.sh deploy

## destroy-local: delete the stack from the emulator
destroy-local:
	scripts/infra-local.sh destroy

## deploy: build and deploy to the AWS account of your credentials (MAIL_FROM=... SES_IDENTITY=...; see README)
deploy: build
	scripts/infra-deploy.sh

## ci-infra: what CI runs for the infrastructure: npm ci, build, synth, CDK tests, deploy onto moto, checks
ci-infra:
	scripts/ci-infra.sh
