# The two commands of the README. Both set up everything they need on a fresh machine.
#   make run   - the dashboard on http://127.0.0.1:8000 (SQLite, in-memory channel layer)
#   make test  - every test
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test venv setup

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

setup: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_catalogs
	$(PY) manage.py ensure_admin

run: setup
	@echo "Serving RSI on http://$(HOST):$(PORT)/ (admin at /admin/)"
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) rsi_site.asgi:application

test: venv
	$(PY) -m pytest
