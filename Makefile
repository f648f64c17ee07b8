# The two commands a newcomer needs: `make demo` and `make test`. Each sets up what it needs and is safe to rerun.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help setup demo test lint format lab-up lab-down lab-status clean

help:
	@echo "make demo    run the main demo on the local lab (Kafka -> Spark real-time mode -> Postgres, ~30 s)"
	@echo "make test    set up everything, then lint and run the whole test suite"
	@echo "make setup   venv, pinned packages, Java check, PostgreSQL binaries, jars"
	@echo "make lab-up / lab-down / lab-status   the local Kafka + PostgreSQL services"
	@echo "make format  apply ruff's formatting and safe fixes"

$(VENV)/.installed: pyproject.toml scripts/bootstrap.sh
	scripts/bootstrap.sh
	touch $@

setup: $(VENV)/.installed
	$(PY) scripts/lab.py setup

demo: setup
	$(PY) scripts/demo.py

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: setup lint
	$(PY) -m pytest

format: $(VENV)/.installed
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

lab-up: setup
	$(PY) scripts/lab.py up

lab-down: $(VENV)/.installed
	$(PY) scripts/lab.py down

lab-status: $(VENV)/.installed
	$(PY) scripts/lab.py status

clean: lab-down
	rm -rf .lab site
