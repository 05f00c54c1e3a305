# The README's two commands: `make demo` and `make test` (`make reproduce`: every table of the docs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data
CACHE ?= .cache

.PHONY: demo reproduce test lint install

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned, so pip takes the CPU wheel on this disk instead of a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/fincrowd demo --data-root $(DATA) --cache-dir $(CACHE)

# every table of the docs and the dense-base default checkpoint (cold: see docs/performance.md)
reproduce: install
	$(BIN)/fincrowd demo --config configs/reproduce.yaml --data-root $(DATA) --cache-dir $(CACHE)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
