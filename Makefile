# ptc: every target a fresh Debian 12 machine needs, run as root.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PY          := $(VENV)/bin/python
PTC         := $(VENV)/bin/ptc
SYSTEM_PY   ?= /usr/bin/python3
APT_PACKAGES := podman runc debootstrap uidmap iptables iproute2 openssh-client e2fsprogs mount \
                python3-venv python3-dev gcc git rsync etcd-server etcd-client lua5.1
# Only the tests need a browser: the live page is tested in Debian's Chromium, driven by
# Selenium through Debian's chromedriver.
TEST_APT_PACKAGES := chromium chromium-driver
DEMO_NAME   ?= demo
DEMO_NODES  ?= 2

export CONTAINERS_CONF := $(CURDIR)/elastic/testbed/backends/local/containers.conf

.PHONY: help setup apt venv image demo test test-unit test-integration lint clean

help:
	@echo "make demo   - profile -> local nodes -> playbooks -> testinfra -> benchmark -> dataset"
	@echo "make test   - lint, then the whole test suite (unit + integration on the local testbed)"
	@echo "make lint   - ruff, mypy, ansible-lint"
	@echo "make setup  - apt packages, .venv and the node image (demo and test run it first)"

setup: apt venv image

apt:
	@missing=$$(for p in $(APT_PACKAGES) $(EXTRA_APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo ">> apt-get install $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# --no-compile: pip would byte-compile every module of every package (ansible-core, SciPy, ...),
# two thirds of the install's CPU; Python compiles and caches the modules it imports instead.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(SYSTEM_PY) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

image: venv
	$(PTC) image build

demo: setup
	$(PTC) demo --name $(DEMO_NAME) --nodes $(DEMO_NODES)

# Integration modules run four at a time (pytest-xdist, one worker per module or shared-cluster
# group): their time is mostly spent waiting on Slurm timers, SSH and systemd, not on the CPUs.
# The elastic module's two groups each keep a worker busy for the whole run, the other two share
# the rest; the run ends with the seconds per group and per worker, to balance them by.
TEST_WORKERS ?= 4
# The unit tests run on two workers; rich draws their tables at a fixed width, whichever test
# first imports the CLI.
UNIT_WORKERS ?= 2
INTEGRATION_ARGS = -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=0 --durations-min=10

# The node images (several minutes on a fresh machine) build in the background while lint and
# the unit tests run, which need no node; the integration tests wait for them. pytest exits 5
# when it collects nothing; that is not a CI failure.
IMAGE_LOG := $(VENV)/image-build.log

test: EXTRA_APT_PACKAGES = $(TEST_APT_PACKAGES)
test: apt venv
	@echo ">> building the node images in the background: $(IMAGE_LOG)"; \
	$(PTC) image build > $(IMAGE_LOG) 2>&1 & images=$$!; \
	trap 'kill $$images 2>/dev/null' EXIT; \
	$(MAKE) --no-print-directory lint || exit $$?; \
	COLUMNS=200 $(PY) -m pytest -p no:cacheprovider -n $(UNIT_WORKERS) tests/unit; rc=$$?; \
	if [ $$rc -ne 0 ] && [ $$rc -ne 5 ]; then exit $$rc; fi; \
	echo ">> waiting for the node images"; \
	if ! wait $$images; then echo "node image build failed:"; tail -40 $(IMAGE_LOG); exit 1; fi; \
	tail -2 $(IMAGE_LOG); \
	trap - EXIT; \
	$(PY) -m pytest -p no:cacheprovider $(INTEGRATION_ARGS) tests/integration; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

test-unit: venv
	COLUMNS=200 $(PY) -m pytest -n $(UNIT_WORKERS) tests/unit; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

test-integration: EXTRA_APT_PACKAGES = $(TEST_APT_PACKAGES)
test-integration: setup
	$(PY) -m pytest $(INTEGRATION_ARGS) tests/integration; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

lint: venv
	$(VENV)/bin/ruff check elastic tests benchmarks profiles plugins roles/slurm/filter_plugins
	$(VENV)/bin/ruff format --check elastic tests benchmarks plugins roles/slurm/filter_plugins
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy roles/slurm/filter_plugins/slurm_conf.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/ansible-lint --profile production roles site.yml elastic-resume.yml elastic-provision.yml config_server.yml

clean:
	-$(PTC) down --all --yes
	rm -rf $(VENV) state
