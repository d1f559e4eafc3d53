# The two commands of the README: `make run` and `make test`. Everything they
# need is installed by the targets below; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCENARIO ?= scenarios/chat.yaml
RUN_ARGS ?=

.PHONY: setup run test lint llama-cpp chromium

$(BIN)/slogate: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/slogate

run: setup
	$(BIN)/slogate run $(SCENARIO) $(RUN_ARGS)

llama-cpp:
	PYTHON=$(PYTHON) tools/install-llama-cpp.sh

chromium:
	tools/install-chromium.sh

lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# pytest exits 5 when it collected no test: that is not a failure of the code.
test: setup llama-cpp chromium lint
	$(BIN)/pytest -q -ra; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc
