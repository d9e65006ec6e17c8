# The two commands of the README. Both set up everything they need on a fresh machine.
#   make run   - the dashboard on http://127.0.0.1:8000 (SQLite, in-memory channel layer)
#   make test  - every test
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
SAPIEN_VENV := .venv-sapien
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-quick lint venv venv-test setup system-run system-test sapien-env openpi-env lerobot-env tracking-env vulkan-layer test-whole-matrix

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

# LeRobot, in its own venvs (it pins its own torch): 0.4 on Python 3.11, and the current release, which needs Python
# 3.12 (pyenv's on these machines). Each lists the config fields it knows: a checkpoint runs on the release it was
# saved with (evaluator/policies/lerobot_releases.py). The 0.4 venv also loads the LeRobot exports back.
PYTHON312 ?= env PYENV_VERSION=3.12.1 python3.12
LEROBOT_FIELDS := evaluator/policies/lerobot_fields.py

.venv-lerobot/.installed: tests/servers/requirements-lerobot.txt $(LEROBOT_FIELDS)
	$(PYTHON) -m venv .venv-lerobot
	.venv-lerobot/bin/python -m pip install --quiet -r tests/servers/requirements-lerobot.txt
	.venv-lerobot/bin/python $(LEROBOT_FIELDS) > .venv-lerobot/rsi-lerobot-fields.json
	touch $@

.venv-lerobot-0.6/.installed: tests/servers/requirements-lerobot-0.6.txt $(LEROBOT_FIELDS)
	$(PYTHON312) -m venv .venv-lerobot-0.6
	.venv-lerobot-0.6/bin/python -m pip install --quiet -r tests/servers/requirements-lerobot-0.6.txt
	.venv-lerobot-0.6/bin/python $(LEROBOT_FIELDS) > .venv-lerobot-0.6/rsi-lerobot-fields.json
	touch $@

lerobot-env: .venv-lerobot/.installed .venv-lerobot-0.6/.installed

# A training environment's trackers (MLflow, W&B), which the client logs campaigns into (rsi_client/tracking.py).
.venv-tracking/.installed: tests/servers/requirements-tracking.txt
	$(PYTHON) -m venv .venv-tracking
	.venv-tracking/bin/python -m pip install --quiet -r tests/servers/requirements-tracking.txt
	touch $@

tracking-env: .venv-tracking/.installed

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

# Test processes side by side (pytest-xdist): most tests wait on processes they started, so more than the cores
# pay; a module stays on one process (its module-scoped servers are started once). docs/testing.md says what each
# count gave. TEST_PROCESSES=0 runs the suite in this one process.
TEST_PROCESSES ?= 2
XDIST = $(if $(filter 0,$(TEST_PROCESSES)),,-n $(TEST_PROCESSES) --dist loadscope)

# The 30 slowest tests are printed at the end and every test's time is kept in test-artifacts/junit.xml.
test: system-test venv-test sapien-env openpi-env lerobot-env tracking-env vulkan-layer lint
	mkdir -p test-artifacts
	$(PY) -m pytest $(XDIST) --durations=30 --junitxml=test-artifacts/junit.xml

# The tests of no group (tests/groups.py: no server, browser, simulator or episode): the inner loop.
test-quick: venv-test
	$(PY) -m pytest $(XDIST) --quick

# The whole 960-cell Visual Matching campaign over two Celery workers against the upstream double
# (about 17 min on 2 cores; `make test` runs one family of it).
test-whole-matrix: system-test venv-test sapien-env vulkan-layer
	RSI_WHOLE_MATRIX_RUN=1 $(PY) -m pytest tests/test_scale_out.py -k whole-matrix
