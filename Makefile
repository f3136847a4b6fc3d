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

HOSTS ?= 3
SANDBOX := $(BIN)/python -m tests.sandbox
# Debian packages the sandbox fleet needs on this machine (installed when root and missing).
SANDBOX_PACKAGES := mmdebstrap openssh-client util-linux mount
# The browser the fleet HTML test renders the page with (installed when root and missing).
BROWSER_PACKAGES := chromium

.PHONY: help venv sandbox-tools browser test unit integration lint demo sandbox-up sandbox-down \
	sandbox-status clean

help:
	@echo "make demo              bring up $(HOSTS) sandbox hosts and check them with hostcheck"
	@echo "make test              install into .venv and run the whole test suite"
	@echo "make lint              ruff and ansible-lint"
	@echo "make sandbox-up HOSTS=3 | sandbox-status | sandbox-down"

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_PIN)"
	$(BIN)/pip install --quiet -e ".[controller,dev]"
	touch $@

venv: $(STAMP)

sandbox-tools:
	@missing=""; for tool in mmdebstrap ssh ssh-keygen unshare losetup; do \
		command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing the sandbox tools (missing:$$missing)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $(SANDBOX_PACKAGES) >/dev/null; \
		else echo "sandbox tools missing:$$missing (integration tests will skip)"; fi; fi

browser:
	@if ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing chromium (the fleet HTML test renders its page with it)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES) >/dev/null; \
		else echo "chromium missing (the fleet HTML test will skip)"; fi; fi

test: $(STAMP) sandbox-tools browser
	$(BIN)/python -m pytest -p no:cacheprovider -q tests

unit: $(STAMP) browser
	$(BIN)/python -m pytest -p no:cacheprovider -q tests/unit

integration: $(STAMP) sandbox-tools
	$(BIN)/python -m pytest -p no:cacheprovider -q tests/integration

sandbox-up: $(STAMP) sandbox-tools
	$(SANDBOX) up --hosts $(HOSTS)

sandbox-down: $(STAMP)
	$(SANDBOX) down

sandbox-status: $(STAMP)
	$(SANDBOX) status

lint: $(STAMP)
	$(BIN)/ruff check hostcheck tests benchmarks filter_plugins
	$(BIN)/ruff format --check hostcheck tests benchmarks filter_plugins
	$(BIN)/ansible-lint --offline

demo: sandbox-up
	$(BIN)/ansible-playbook -i inventory/sandbox/hosts.yml site.yml
	@stamp=$$(date -u +%Y%m%dT%H%M%SZ); $(BIN)/ansible -i inventory/sandbox/hosts.yml gpu_nodes \
		-m ansible.builtin.fetch -o -a "src=/var/lib/hostcheck/report.json \
		dest=$(CURDIR)/reports/$$stamp/{{ inventory_hostname }}.json flat=true" >/dev/null; \
		echo; echo "hostcheck reports: $(CURDIR)/reports/$$stamp/"
	@echo "the fleet stays up: make sandbox-status; ssh in as shown above; make sandbox-down"

clean:
	rm -rf $(VENV) build *.egg-info
