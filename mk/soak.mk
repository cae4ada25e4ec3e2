# The crash soak (scripts/soak.sh; not part of `make test` or CI).

.PHONY: soak

## soak: SIGKILL the local server at random moments under concurrent clients for SOAK_SECONDS (120), SOAK_KILLS kills (one per 5 s), then check nothing is stuck, lost or written twice (SOAK_STORE=aws: on DynamoDB+S3 via AWS_ENDPOINT_URL)
soak:
	scripts/soak.sh
