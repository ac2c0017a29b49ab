# Shortcuts; each target is one documented command.
PY ?= .venv/bin/python

.PHONY: install test test-under-load lint chaos chaos-short bench

install:
	python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]'

test:
	$(PY) -m pytest

# The suite while two busy loops hold both cores, as on a CI machine shared with other builds; the
# loops stop when the suite ends, pass or fail. ARGS narrows it: make test-under-load ARGS=tests/test_clock.py
test-under-load:
	$(PY) tests/support/busy.py --loops 2 -- $(PY) -m pytest $(ARGS)

lint:
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && $(PY) -m mypy

# The fault and load suite, full size (a few minutes); CI runs `chaos-short`.
chaos:
	$(PY) -m pytest -m chaos -o addopts="" -s

chaos-short:
	$(PY) -m pytest -m chaos -o addopts="" --chaos-short

# Every benchmark, each printing its figures beside its anchor.
bench:
	$(PY) bench/roundtrip.py
	$(PY) bench/fetch_throughput.py
	$(PY) bench/loop_lag.py
	$(PY) bench/hostile_load.py
	$(PY) bench/cache.py
	$(PY) bench/extraction.py
	$(PY) bench/metadata.py
	$(PY) bench/pdf.py
	$(PY) bench/long_documents.py
	$(PY) bench/scale.py
	$(PY) bench/cli_fail_fast.py
	$(PY) bench/dashboard_writes.py
	$(PY) bench/archive.py
	$(PY) bench/script_shell.py
	$(PY) bench/render.py
	$(PY) bench/idle_commands.py
