# The API contract (openapi.yaml): third-party checks with the npm tools
# pinned in tools/contract (scripts/contract.sh installs them with npm ci).
.PHONY: contract contract-lint contract-prism

## contract: Redocly lint of openapi.yaml, then the end-to-end story through Prism's validating proxy
contract:
	scripts/contract.sh

contract-lint:
	scripts/contract.sh lint

contract-prism:
	scripts/contract.sh prism
