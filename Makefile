# Two commands on a fresh machine: `make run` serves the page, `make test` runs every check.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.stamp

.PHONY: run test lint pytest install install-dev install-chattts bench chaos clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade "pip>=25.1"
	$(PIP) install -q -e .
	touch $@

install: $(STAMP)

$(VENV)/.stamp-dev: $(STAMP)
	$(PIP) install -q --group dev
	touch $@

install-dev: $(VENV)/.stamp-dev

$(VENV)/.stamp-chattts: $(STAMP)
	$(PIP) install -q -e ".[chattts]"
	touch $@

install-chattts: $(VENV)/.stamp-chattts

## Start the whole service on this machine (embedded Redis, web, one worker) and print the URL.
run: install
	$(VENV)/bin/chattts-online run

## Lint, type-check and run the whole test suite (real Redis, workers, engines and browser).
test: install-dev install-chattts lint pytest

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

pytest: install-dev
	$(VENV)/bin/pytest

## Every measurement, ours against the baseline, one table (bench/results/suite.md).
## BENCH_ARGS: e.g. --quick, --only 2,3, --repeats 5 (python -m bench.suite --help).
## Measurement 6 needs the ChatTTS extra (make install-chattts); without it its row is skipped.
bench: install-dev
	$(PY) -m bench.suite $(BENCH_ARGS)

## Workers killed and Redis restarted mid-run, then a Sentinel failover under load (bench/failover.py).
chaos: install-dev
	$(PY) -m bench.chaos
	$(PY) -m bench.failover

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache data
