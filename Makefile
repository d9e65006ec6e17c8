# The two commands of the README. Both set up everything they need on a fresh machine.
#   make run   - the dashboard on http://127.0.0.1:8000 (SQLite, in-memory channel layer)
#   make test  - every test
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
SAPIEN_VENV := .venv-sapien
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint venv venv-test setup system-run system-test sapien-env openpi-env lerobot-env vulkan-layer test-whole-matrix

# Serving needs only requirements.txt; the tests add pytest, Playwright, ruff and the torch extra.
$(VENV)/.installed-run: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-run requirements-dev.txt requirements-torch.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed-run
venv-test: $(VENV)/.installed-test

# The SAPIEN worker runs in its own interpreter (numpy<2, gymnasium<1.0, sapien 2.2.2).
$(SAPIEN_VENV)/.installed: environment/sapien/requirements.txt
	$(PYTHON) -m venv $(SAPIEN_VENV)
	$(SAPIEN_VENV)/bin/python -m pip install --quiet -r environment/sapien/requirements.txt
	touch $@

sapien-env: $(SAPIEN_VENV)/.installed

# The tests' stock openpi server runs on openpi-client's codec in its own venv (numpy<2).
.venv-openpi/.installed: tests/servers/requirements-openpi.txt
	$(PYTHON) -m venv .venv-openpi
	.venv-openpi/bin/python -m pip install --quiet -r tests/servers/requirements-openpi.txt
	touch $@

openpi-env: .venv-openpi/.installed

# The lerobot package, to load the LeRobot exports back, in its own venv (it pins its own torch).
.venv-lerobot/.installed: tests/servers/requirements-lerobot.txt
	$(PYTHON) -m venv .venv-lerobot
	.venv-lerobot/bin/python -m pip install --quiet -r tests/servers/requirements-lerobot.txt
	touch $@

lerobot-env: .venv-lerobot/.installed

# The Vulkan layer that lets SAPIEN create its device on lavapipe (environment/RENDERING.md).
vulkan-layer:
	$(MAKE) --no-print-directory -C environment/vulkan

system-run:
	PYTHON=$(PYTHON) bash scripts/system-packages.sh run

system-test:
	PYTHON=$(PYTHON) bash scripts/system-packages.sh test

setup: system-run venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_catalogs

# The credentials come last, just before serving: the pip and migration output is above them.
run: setup
	@$(PY) manage.py ensure_admin --serving "http://$(HOST):$(PORT)/ (the admin at /admin/)"
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) rsi_site.asgi:application

# Lint and format check (ruff, configured in pyproject.toml); `ruff format .` fixes the format.
lint: venv-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: system-test venv-test sapien-env openpi-env lerobot-env vulkan-layer lint
	mkdir -p test-artifacts
	$(PY) -m pytest

# The whole 960-cell Visual Matching campaign over two Celery workers against the upstream double
# (about 17 min on 2 cores; `make test` runs one family of it).
test-whole-matrix: system-test venv-test sapien-env vulkan-layer
	RSI_WHOLE_MATRIX_RUN=1 $(PY) -m pytest tests/test_scale_out.py -k whole-matrix
