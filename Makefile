# Every target sets up what it needs: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup browser demo test lint typecheck unit functional infra synth bench deploy clean

$(STAMP): pyproject.toml requirements/runtime.txt requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# Debian's Chromium, which the HTML report's tests render the page in (tests/headless_chromium.py;
# $$HYPERPOD_NCCL_CHROMIUM names another browser). Installed once, as root or through sudo; the
# package lists are refreshed only when the first try finds nothing to install.
browser:
	@command -v chromium >/dev/null 2>&1 || [ -n "$$HYPERPOD_NCCL_CHROMIUM" ] || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing Debian's chromium for the HTML report's browser tests"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null || { \
	    $$sudo apt-get update -q >/dev/null && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; }; }

demo: $(STAMP)
	$(BIN)/hyperpod-nccl demo

lint: $(STAMP)
	$(BIN)/ruff check functions infra tests
	$(BIN)/ruff format --check functions infra tests
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

# worksteal, not xdist's default `load`: `load` hands each worker long runs of tests up front and
# never moves them, so one worker ended with the whole fault matrix while the other sat idle (the
# suite took 19 min on 2 cores; 13.5 with worksteal, both workers busy to the end). Three workers on
# two cores: half the suite's time is waiting (paced StartSessions, SDK timeouts, Step Functions
# retries, a silent endpoint), and make test used 97% of one core's worth of the two with two workers.
TEST_WORKERS ?= 3
test: $(STAMP) browser
	$(BIN)/ruff check functions infra tests
	$(BIN)/mypy
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal -m "not bench"

# One target per test layer (tests/README.md); `make test` runs the first three together.
unit: $(STAMP)
	$(BIN)/pytest tests/unit

functional: $(STAMP) browser
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal tests/functional

# Serial on purpose: the layer shares one synthesis per process (tests/infra/conftest.py).
infra: $(STAMP)
	$(BIN)/pytest tests/infra

# Offline: no AWS account, no Docker. Builds (or reuses) the Lambda layer in layers/build with pip
# for Lambda's platform, runs cdk-nag, and writes the cloud assembly to cdk.out (or $CDK_OUTDIR).
synth: $(STAMP)
	$(BIN)/python -m infra.app

# Deploys with the npm CLI of AWS CDK (needs Node.js, AWS credentials and a bootstrapped
# account/region: `npx aws-cdk@2 bootstrap`). Configuration: cdk.json, or e.g.
#   make deploy CDK_ARGS="-c alertEmails='[\"oncall@example.com\"]' -c sweepRateMinutes=15"
CDK_ARGS ?=
deploy: $(STAMP)
	npx --yes aws-cdk@2 deploy --app "$(BIN)/python -m infra.app" $(CDK_ARGS)

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run

clean:
	rm -rf $(VENV) cdk.out layers/build layers/compiler .pytest_cache .mypy_cache .ruff_cache
