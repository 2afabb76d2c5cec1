# The README's two commands: `make demo` and `make test`. Both create or update .venv first;
# re-running them skips the install when pyproject.toml has not changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install demo test lint browser libraries environments

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

# Debian's Chromium, for the test that opens the HTML report as a person would; where it
# cannot be installed, that test skips and says why.
browser:
	@test -x $(CHROMIUM) || $(SUDO) apt-get install -y -q --no-install-recommends chromium \
		|| ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends \
		chromium) || echo "make: could not install chromium; the browser test will skip"

# Debian's jemalloc and TCMalloc, for the allocator setting (docs/libraries.md); where they
# cannot be installed, allocator=jemalloc|tcmalloc says so and their tests skip.
LIBRARY_PACKAGES := libjemalloc2 libtcmalloc-minimal4
libraries:
	@dpkg -s $(LIBRARY_PACKAGES) >/dev/null 2>&1 \
		|| $(SUDO) apt-get install -y -q --no-install-recommends $(LIBRARY_PACKAGES) \
		|| ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q \
		--no-install-recommends $(LIBRARY_PACKAGES)) \
		|| echo "make: could not install $(LIBRARY_PACKAGES); allocator=jemalloc|tcmalloc will say so"

# MXNet's own virtualenv (numpy 1.23), built once through MLflow's project environments
# (about 100 s), so that the demo's and the tests' first MXNet run does not wait for it.
environments: $(STAMP)
	@$(BIN)/mlflow-dlaas prepare mxnet \
		|| echo "make: could not build MXNet's environment; its runs will try again and say why"

demo: $(STAMP) libraries environments
	$(BIN)/mlflow-dlaas demo

# ruff, and the package's layers (import-linter's contracts in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check mlflow_dlaas tests benchmarks examples scripts
	$(BIN)/lint-imports --no-cache

# Three pytest workers (pytest-xdist) on two cores: the tests wait on processes and servers
# much of the time, and a third worker fills those waits (29 min 50 s to 23 min 48 s on a
# Zen 4, docs/performance.md). The tests that share one costly run (the demo, the documented
# study, the report's runs, a module's fixture) run on one worker (tests/conftest.py).
test: lint browser libraries environments
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -ra --durations=15 \
		-n 3 --dist loadgroup
