# The two commands a newcomer needs: `make demo` and `make test`. Each sets up what it needs and is safe to rerun.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help setup lab-setup demo test test-fast test-versions lint format lab-up lab-down lab-status clean docs docs-build skill

help:
	@echo "make demo    run the main demo on the local lab (Kafka -> Spark real-time mode -> Postgres, a warm-up then 30 s)"
	@echo "make test    set up everything, then lint and run the whole test suite"
	@echo "make test-fast   lint, docs, skill, generators and quick Spark cases only (pytest -m 'not slow', < 3 min)"
	@echo "make test-versions   quick start, trigger, support-matrix and allowlist-off cases on PySpark 4.1.4, 4.2.1 and 4.3.0 (heavy)"
	@echo "make setup   everything the test suite needs: lab-setup, plus Prometheus, the JVM snippets' jar, the PyFlink venv, a class archive, the object store, Chromium"
	@echo "make lab-setup   what the lab and the demo need: venv, pinned packages, Java check, PostgreSQL binaries, jars"
	@echo "make lab-up / lab-down / lab-status   the local Kafka + PostgreSQL services"
	@echo "make format  apply ruff's formatting and safe fixes"
	@echo "make docs    serve the docs site on http://127.0.0.1:8000 (make docs-build: strict build into site/)"
	@echo "make skill   regenerate the AI-assistant skill and manifest.json, and package it into dist/"

$(VENV)/.installed: pyproject.toml scripts/bootstrap.sh
	scripts/bootstrap.sh
	touch $@

# The test sessions load the JVM snippets' jar, the engine comparison's tests run Flink in the PyFlink venv, the
# suite's Spark drivers start from a class archive (rtm_lab.spark_class_archive), and the checkpoint-storage tests use
# the lab's object store (versitygw, minutes of CPU to build on a machine whose Go caches are cold): all built here
# once, not in a test, where the build would count against a test's 300 s timeout.
setup: $(VENV)/.installed
	$(PY) scripts/lab.py setup --prometheus --jvm-snippets --flink --spark-archive --s3
	scripts/setup_browser.sh

# The lab, the demo and the get-started tutorial need only this: no Prometheus, JVM snippets' jar, PyFlink venv, class
# archive or docs browser.
lab-setup: $(VENV)/.installed
	$(PY) scripts/lab.py setup

demo: lab-setup
	$(PY) scripts/demo.py

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) scripts/skills.py validate
	$(PY) scripts/tables.py all --check
	$(PY) scripts/prose.py check --targets

# Three workers by default on 2 cores (tests/parallel.py says how they share one lab: a test marked `alone` runs while
# no other does, one marked `timing` runs first in line for the CPU). Much of a streaming test is waiting for an
# interval or a commit, and a third worker fills those waits: see tests/README.md for the measured times.
# PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 3
PARALLEL := -n $(PYTEST_WORKERS)

test: setup lint
	$(PY) -m pytest $(PARALLEL)

test-fast: setup lint
	$(PY) -m pytest $(PARALLEL) -m "not slow"

# Not part of `make test`: it builds a venv per PySpark version and runs every case on each (tens of minutes). It
# rewrites docs/results/version-matrix.{json,md}, which the tables check keeps in step.
test-versions: lab-setup
	$(PY) scripts/version_matrix.py

format: $(VENV)/.installed
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

lab-up: lab-setup
	$(PY) scripts/lab.py up

lab-down: $(VENV)/.installed
	$(PY) scripts/lab.py down

lab-status: $(VENV)/.installed
	$(PY) scripts/lab.py status

# --purge also removes a PostgreSQL cluster kept outside .lab (the private /tmp folder used when root's clone is closed).
clean: $(VENV)/.installed
	$(PY) scripts/lab.py down --purge
	rm -rf .lab site

docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve -a 127.0.0.1:8000

docs-build: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

skill: $(VENV)/.installed
	$(PY) scripts/skills.py generate
	$(PY) scripts/skills.py package
