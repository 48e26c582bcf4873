# One entry point for people and CI. `make test` is the README's test command.
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
SCENARIOS ?= post_mortem legacy online faults
# `make up`: a local sandbox cluster of containers.
WORKERS ?= 2
MODE ?= post_mortem
SANDBOX_INVENTORY := artifacts/ray-sandbox/hosts.yml
# `make probe`: any cluster's inventory; the sandbox's by default.
INVENTORY ?= $(SANDBOX_INVENTORY)

.PHONY: setup image lint unit molecule sandbox test clean up down probe bench docs \
	needs-venv needs-docker needs-scans needs-rsync

setup: $(VENV)/.installed

# What the machine lacks, installed (root, Debian or Ubuntu) or named with the command that
# installs it, before anything runs: tools/prerequisites.sh.
needs-venv:
	tools/prerequisites.sh venv
needs-docker:
	tools/prerequisites.sh docker debootstrap
needs-scans:
	tools/prerequisites.sh nmap ssh
needs-rsync:
	tools/prerequisites.sh rsync

# pyproject.toml too: the editable install maps the modules it lists (ray_port_range).
$(VENV)/.installed: requirements.txt pyproject.toml | needs-venv
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -r requirements.txt
	touch $@

# The node image molecule boots; built without a registry when none answers.
image: needs-docker
	molecule/image/build.sh

up: setup image
	ansible-playbook playbooks/sandbox_up.yml -e sandbox_workers=$(WORKERS)
	ansible-playbook -i $(SANDBOX_INVENTORY) cluster-up.yml -e debug_mode=$(MODE)

down: setup
	ansible-playbook playbooks/sandbox_down.yml

probe: setup
	ansible-playbook -i $(INVENTORY) playbooks/debug_probe.yml

lint: setup
	yamllint --strict .
	ansible-lint
	ruff check .
	ruff format --check .
	ansible-playbook --syntax-check cluster-up.yml cluster-down.yml

unit: setup
	pytest tests/unit

# docs/roles.md from the roles' argument specs; a unit test fails when it is stale.
docs: setup
	python tools/role_docs.py

# Each scenario's nodes run Debian 12 (bookworm) unless named here: online runs on Debian 13
# (Python 3.13: Ray and debugpy, verl refused).
NODE_SUITE_online := trixie

molecule: needs-scans
	set -e; for scenario in $(SCENARIOS); do $(MAKE) --no-print-directory scenario-$$scenario; done

scenario-%: setup needs-docker
	molecule/image/build.sh $(or $(NODE_SUITE_$*),bookworm)
	MOLECULE_NODE_SUITE=$(or $(NODE_SUITE_$*),bookworm) molecule test -s $*

# `make up` / `make probe` / `make down` as a newcomer runs them.
sandbox: setup image needs-scans
	pytest tests/sandbox

test: lint unit molecule sandbox

# Timings live here, never in tests: writes docs/benchmarks.md and docs/benchmarks.png.
bench: setup image needs-rsync
	pip install --quiet -r bench/requirements.txt
	python -m bench.run $(BENCH_ARGS)

clean: down
	for scenario in $(SCENARIOS); do molecule destroy -s $$scenario || true; done
	rm -rf artifacts .cache
