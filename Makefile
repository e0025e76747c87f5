# Croupier: every target that needs Python creates .venv and installs the project first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Test workers: most tests wait on PostgreSQL, RabbitMQ, subprocesses and timeouts (a test's
# wall time is six times its CPU time), so six overlap well on two cores; tests marked with
# an xdist_group run one after another on one worker. PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 6
PYTEST := $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup

.PHONY: run test test-unit test-integration test-slow chaos soak soak-short bench bench-compare bench-scale bench-history bench-history-drop lint typecheck contracts par integrity-tables services clean tools

# pip shows each step (no --quiet): a first `make run` says what it is doing all along.
$(STAMP): pyproject.toml
	@echo "make: installing the project into $(VENV) (first use or pyproject.toml changed; a minute or two)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --progress-bar off -e '.[dev,bench]'
	touch $(STAMP)

## run: the main job (live service + studio simulator; embedded bus and SQLite when no broker/database)
run: $(STAMP)
	$(BIN)/croupier demo

## test: unit and integration tests (integration needs PostgreSQL and RabbitMQ; see `make services`)
test: $(STAMP) tools
	$(PYTEST) --durations=25

## tools: what the tests need besides Python (promtool checks the Prometheus rules in deploy/;
## headless Chromium and chromedriver load the history pages)
tools:
	@command -v promtool >/dev/null || { \
	  echo "make test: promtool is missing; the deploy/ tests check the Prometheus rules with it."; \
	  echo "  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y prometheus"; \
	  echo "  elsewhere: put promtool from https://prometheus.io/download/ on PATH"; \
	  exit 2; }
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "make test: chromium or chromedriver is missing; the browser tests load the history pages."; \
	  echo "  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y chromium chromium-driver"; \
	  exit 2; }

## test-unit: the unit tests, no services needed
test-unit: $(STAMP)
	$(PYTEST) tests/unit

## test-integration: the integration and end-to-end tests (PostgreSQL and RabbitMQ)
test-integration: $(STAMP)
	$(PYTEST) tests/integration tests/e2e tests/chaos

## test-slow: exhaustive runs (all 133,784,560 seven-card hands, full PAR recomputation)
test-slow: $(STAMP)
	$(BIN)/pytest -m slow

## chaos: the money path under the hostile corpus and faults, and a partitioned fleet under faults; full forms (the short forms run in `make test`)
chaos: $(STAMP)
	CROUPIER_CHAOS=full $(BIN)/pytest -s tests/chaos/test_chaos.py tests/chaos/test_partition_chaos.py

## soak: an hour at 1,000 events/s; memory flat (<= 50 MiB growth after warm-up), nothing lost
soak: $(STAMP)
	CROUPIER_SOAK_SECONDS=3600 $(BIN)/pytest -s -m soak tests/chaos/test_soak.py

## soak-short: the same for CROUPIER_SOAK_SECONDS (default 120) at CROUPIER_SOAK_RATE (default 1000)
soak-short: $(STAMP)
	$(BIN)/pytest -s -m soak tests/chaos/test_soak.py

## bench: throughput figures against the named anchors, measured in the same run
bench: $(STAMP)
	$(BIN)/python -m bench

## bench-compare: replay throughput against another revision, side by side (REV=90e484e)
bench-compare: $(STAMP)
	$(BIN)/python -m bench.compare $(REV)

## bench-scale: 1, 2 and 4 partitioned `croupier serve` processes draining a 200,000-message backlog
bench-scale: $(STAMP)
	$(BIN)/python -m bench scale

## bench-history: croupier web under 50 clients over 1,000,000 settlement results (built once)
bench-history: $(STAMP)
	$(BIN)/python -m bench history

## bench-history-drop: drop the bench-history database (gigabytes) from the local PostgreSQL
bench-history-drop: $(STAMP)
	$(BIN)/python -m bench.history drop

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

## contracts: regenerate JSON Schemas under contracts/ from the models
contracts: $(STAMP)
	$(BIN)/croupier contracts --out contracts

## par: recompute the stored PAR sheets of every pay table
par: $(STAMP)
	$(BIN)/croupier par --all --write

## integrity-tables: build the exact flop tables of every pay table once (under a minute; kept in
## $XDG_CACHE_HOME/croupier or ~/.cache/croupier; otherwise built on first use)
integrity-tables: $(STAMP)
	$(BIN)/croupier integrity --tables

## services: start local PostgreSQL and RabbitMQ if they are not running
services:
	./.ci/services

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
