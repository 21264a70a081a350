# agents-chain sidecar — two commands: `make demo`, `make test`.
SHELL := /bin/bash
NODE_MODULES_STAMP := node_modules/.package-lock.json

.PHONY: demo test build lint bench clean

$(NODE_MODULES_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $(NODE_MODULES_STAMP)

build: $(NODE_MODULES_STAMP)
	npx tsc -p tsconfig.json
	@chmod +x dist/cli/main.js

lint: $(NODE_MODULES_STAMP)
	npx tsc -p test/tsconfig.json

test: build
	npx tsc -p test/tsconfig.json
	npx vitest run --dir test

demo: build
	node dist/demo/run.js

bench: build
	node bench/run.mjs

clean:
	rm -rf dist
