# Everything a fresh Debian 12 machine needs is installed by these targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch that pip takes from this machine's disk; GPU nodes get theirs
# from the training venv.
TORCH_PIN ?= torch==2.13.0
# torchvision for the ImageFolder job script (tests/jobs/): the release built for that torch
TORCHVISION_PIN ?= torchvision==0.28.0
STAMP := $(VENV)/.installed
# pytest workers: test modules run side by side. Three on two cores: while one waits (Slurm's
# health-check interval, a host booting) the other two use both cores. Faster on the machine of
# 2026-11-30 (make test-all 1,347-1,397 s against 1,586 s with two; the gate 213 s against
# 233 s), as fast on an earlier one (1,804 s against 1,810 s): docs/development.md
JOBS ?= 3

HOSTS ?= 3
# OS kinds of the sandbox hosts, taken in turn (tests/sandbox/oskinds.py); empty: a mix
OS ?=
SANDBOX := $(BIN)/python -m tests.sandbox
# Debian packages the sandbox fleet needs on this machine (installed when root and missing):
# systemd-nspawn boots the hosts; rpm and createrepo-c build the Rocky look-alikes' repository.
SANDBOX_PACKAGES := mmdebstrap systemd-container rpm createrepo-c openssh-client util-linux mount gnupg gcc binutils rsync
# The browser the fleet HTML test renders the page with (installed when root and missing).
BROWSER_PACKAGES := chromium
# Prometheus and promtool for the rule tests and the monitoring integration tests (the tests
# start their own Prometheus; the package's service is kept from starting on this machine).
MONITORING_PACKAGES := prometheus

.PHONY: help venv collection-link sandbox-tools browser monitoring-tools test test-all record-full-pass test-faults unit integration lint costs demo sandbox-up sandbox-down \
	sandbox-status clean

help:
	@echo "make demo              bring up $(HOSTS) sandbox hosts of mixed OS kinds, provision them (site.yml), audit them"
	@echo "make test              install into .venv and run the gate: unit, sanity, smoke converge, the modules the change selects"
	@echo "make test-all          every test (then make record-full-pass at a clean commit: the base of make test's selection)"
	@echo "make test-faults       only the fault tests (killed runs, power cuts, locks, a full disk; part of make test-all)"
	@echo "make lint              ruff and ansible-lint"
	@echo "make costs             each test module's wall and CPU time in the last run, costliest first"
	@echo "make sandbox-up HOSTS=3 [OS=debian12,ubuntu2404,rocky9] | sandbox-status | sandbox-down"

# --no-compile: pip would byte-compile every file of torch and ansible (25 of the step's 63 s
# here); Python compiles what is imported, once, on first import: unless PYTHONDONTWRITEBYTECODE
# is set (this machine's shells set it), and then every Python process (each ansible-playbook,
# each pytest worker's collection, each import of torch) compiles its modules again.
unexport PYTHONDONTWRITEBYTECODE
# setuptools says of every editable install of a package that is a folder of the working
# directory "Editable installation ... folders in your working directory with the same name as
# your package may take precedence during imports": here they are that package (the checkout).
EDITABLE_QUIET = PYTHONWARNINGS="ignore:Editable installation"
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-compile --upgrade pip
	$(BIN)/pip install --quiet --no-compile "$(TORCH_PIN)"
	$(BIN)/pip install --quiet --no-compile "$(TORCHVISION_PIN)"
	$(EDITABLE_QUIET) $(BIN)/pip install --quiet --no-compile -e ".[controller,dev,node]"
	touch $@

venv: $(STAMP)

# this checkout as the collection hostcheck.gpu_hosts (ansible.cfg's collections path)
collection-link: $(STAMP)
	@$(BIN)/python -m tests.collection_link >/dev/null

# $(call apt_install,WHAT,COMMANDS,PACKAGES): install PACKAGES with apt when root and one of
# COMMANDS is missing; without root say which tests will skip.
define apt_install
	@missing=""; for tool in $(2); do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing $(1) (missing:$$missing)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $(3) >/dev/null; \
		else echo "$(1) not installed (missing:$$missing): their tests will skip"; fi; fi
endef

sandbox-tools:
	$(call apt_install,the sandbox tools,mmdebstrap systemd-nspawn rpmbuild createrepo_c ssh ssh-keygen unshare losetup gpg gcc objcopy rsync,$(SANDBOX_PACKAGES))

# the fleet HTML test renders its page in headless Chromium
browser:
	$(call apt_install,the browser,chromium,$(BROWSER_PACKAGES))

# Debian's package starts its service on install: policy-rc.d (101: not allowed) keeps it from
# starting, and goes again unless it was there before.
monitoring-tools:
	@if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing Prometheus and promtool (missing; the service is not started)"; \
			mine=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
				printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; \
				chmod 755 /usr/sbin/policy-rc.d; mine=1; fi; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $(MONITORING_PACKAGES) >/dev/null; \
			status=$$?; [ -z "$$mine" ] || rm -f /usr/sbin/policy-rc.d; exit $$status; \
		else echo "Prometheus not installed: its tests will skip"; fi; fi

# The gate: unit tests, the local integration tests, the collection with ansible-test sanity,
# the smoke converge, and the integration modules that what changed since the last full pass
# (tests/full_pass.json) selects (tests/selection.py says which and why)
test: $(STAMP) collection-link sandbox-tools browser monitoring-tools
	$(BIN)/python -m pytest -p no:cacheprovider -q -n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=15 --changed-only tests

# every test; then `make record-full-pass` at a clean commit records it as the selection's base
test-all: $(STAMP) collection-link sandbox-tools browser monitoring-tools
	$(BIN)/python -m pytest -p no:cacheprovider -q -n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=15 tests

record-full-pass: $(STAMP)
	$(BIN)/python -m tests.selection record

test-faults: $(STAMP) collection-link sandbox-tools monitoring-tools
	$(BIN)/python -m pytest -p no:cacheprovider -q -n $(JOBS) --dist loadfile -m faults tests/integration

unit: $(STAMP) browser monitoring-tools
	$(BIN)/python -m pytest -p no:cacheprovider -q tests/unit

integration: $(STAMP) collection-link sandbox-tools monitoring-tools
	$(BIN)/python -m pytest -p no:cacheprovider -q -n $(JOBS) --dist loadfile --no-loadscope-reorder tests/integration

costs: $(STAMP)
	$(BIN)/python -m tests.costs

sandbox-up: $(STAMP) collection-link sandbox-tools
	$(SANDBOX) up --hosts $(HOSTS) $(if $(OS),--os $(OS))

sandbox-down: $(STAMP)
	$(SANDBOX) down

sandbox-status: $(STAMP)
	$(SANDBOX) status

lint: $(STAMP) collection-link
	$(BIN)/ruff check hostcheck tests benchmarks plugins docs
	$(BIN)/ruff format --check hostcheck tests benchmarks plugins docs
	$(BIN)/ansible-lint --offline

# The demo measures each host's DataLoader settings (hostcheck_dataloader_enabled), which the
# audit's fleet table then shows per host (workers); the sandbox's tests leave it off.
demo: sandbox-up
	$(BIN)/ansible-playbook -i inventory/sandbox/hosts.yml site.yml -e hostcheck_dataloader_enabled=true
	$(BIN)/ansible-playbook -i inventory/sandbox/hosts.yml playbooks/audit.yml
	@echo "the fleet stays up: make sandbox-status; ssh in as shown above; make sandbox-down"

clean:
	rm -rf $(VENV) build *.egg-info
