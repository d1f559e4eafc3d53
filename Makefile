# The commands of the README: `make run`, `make check` and `make test`. Everything
# they need is installed by the targets below; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The versions the tests passed with; `make lock` re-resolves them within
# pyproject.toml's ranges.
LOCK := constraints.txt
SCENARIO ?= scenarios/chat.yaml
RUN_ARGS ?=

.PHONY: setup run check test lint types lock llama-cpp vllm chromium

# Compiled modules are cached (in __pycache__, which git ignores) even where the
# environment says not to: pytest then rewrites the tests' asserts once, not on
# every run (collection 7.0 s, then 2.8 s).
unexport PYTHONDONTWRITEBYTECODE

# The rooms' __init__.py too: the editable install maps each room when it is
# made, so a new room (a new top-level package) needs a fresh install.
$(BIN)/slogate: pyproject.toml setup.py $(LOCK) $(wildcard */__init__.py)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --constraint $(LOCK) --upgrade pip
	$(BIN)/pip install --quiet --constraint $(LOCK) -e '.[dev]'
	touch $@

setup: $(BIN)/slogate

run: setup
	$(BIN)/slogate run $(SCENARIO) $(RUN_ARGS)

# A fresh venv, the newest versions pyproject.toml allows, written to $(LOCK).
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet -e '.[dev]'
	{ echo "# The tested versions: make setup and CI install with --constraint $(LOCK)."; \
	  echo "# Regenerate with make lock after changing pyproject.toml's dependencies."; \
	  .lock-venv/bin/pip freeze --all --exclude-editable; } > $(LOCK)
	rm -rf .lock-venv

llama-cpp:
	PYTHON=$(PYTHON) tools/install-llama-cpp.sh

# vLLM's CPU build in its own environment in the cache (not the project's venv).
vllm:
	PYTHON=$(PYTHON) tools/install-vllm.sh

chromium:
	tools/install-chromium.sh

lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# mypy on the package as installed: a link tree maps each room to slogate.<room>
# (the editable install's finder, which mypy cannot follow, does that at run time).
# The cache stays in .mypy_cache, so a check after a small change takes seconds.
TYPES_TREE := .mypy_cache/tree
ROOMS := $(filter-out slogate tests bench tools,$(patsubst %/__init__.py,%,$(wildcard */__init__.py)))
types: setup
	rm -rf $(TYPES_TREE) && mkdir -p $(TYPES_TREE)/slogate
	ln -s $(CURDIR)/slogate/*.py $(TYPES_TREE)/slogate/
	for room in $(ROOMS); do ln -s $(CURDIR)/$$room $(TYPES_TREE)/slogate/$$room; done
	cd $(TYPES_TREE) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/.mypy_cache --python-executable $(CURDIR)/$(BIN)/python -p slogate

# Tests run in parallel, one worker per core (pytest-xdist); a module's tests,
# and tests marked with one xdist_group, share a worker (tests/conftest.py).
PARALLEL := -n auto --dist loadgroup

# Unit and fast wire tests, for every change (under a minute).
check: setup lint types
	$(BIN)/pytest -q -ra $(PARALLEL) -m "not slow and not llamacpp and not vllm and not browser"

# The whole suite, as CI runs it; the 25 slowest tests are listed at the end, to
# keep the run well under the 30 minutes it aims for.
test: setup llama-cpp vllm chromium lint
	$(BIN)/pytest -q -ra --durations=25 $(PARALLEL)
