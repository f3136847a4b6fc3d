# Everything a fresh Debian 12 machine needs is installed by these targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch that pip takes from this machine's disk; GPU nodes get theirs
# from the training venv.
TORCH_PIN ?= torch==2.13.0
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: help venv test unit lint demo clean

help:
	@echo "make demo   run hostcheck on this machine (the sandbox fleet comes next)"
	@echo "make test   install into .venv and run the whole test suite"
	@echo "make lint   ruff (and ansible-lint once roles exist)"

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_PIN)"
	$(BIN)/pip install --quiet -e ".[controller,dev]"
	touch $@

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -q tests

unit: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check hostcheck tests benchmarks
	$(BIN)/ruff format --check hostcheck tests benchmarks

demo: $(STAMP)
	@# exit code 1 means a check failed on this machine: that is the demo's finding
	$(BIN)/hostcheck run; rc=$$?; [ $$rc -le 1 ]

clean:
	rm -rf $(VENV) build *.egg-info
