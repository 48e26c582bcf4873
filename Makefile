# One entry point for people and CI. `make test` is the README's test command.
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
SCENARIOS ?= post_mortem online faults
# `make up`: a local sandbox cluster of containers.
WORKERS ?= 2
MODE ?= post_mortem
SANDBOX_INVENTORY := artifacts/ray-sandbox/hosts.yml
# `make probe`: any cluster's inventory; the sandbox's by default.
INVENTORY ?= $(SANDBOX_INVENTORY)

.PHONY: setup image images lint controller host molecule sandbox test clean up down probe evidence bench docs \
	needs-venv needs-docker needs-scans needs-rsync needs-gcc

setup: $(VENV)/.installed

# What the machine lacks, installed (root, Debian or Ubuntu) or named with the command that
# installs it, before anything runs: tools/prerequisites.sh.
needs-venv:
	tools/prerequisites.sh venv
needs-docker:
	tools/prerequisites.sh docker debootstrap
needs-scans:
	tools/prerequisites.sh nmap ssh curl
needs-rsync:
	tools/prerequisites.sh rsync
# The unit tests build a stand-in libcuda.so.1 to run the GPU proof against a driver.
needs-gcc:
	tools/prerequisites.sh gcc

# pyproject.toml too: requirements.txt installs the operator CLI from it (editable).
# Bytecode compiled at install: where the environment sets PYTHONDONTWRITEBYTECODE (many
# container images do, and so did the bench's machine), Python cannot write it at first import
# and compiles Ansible from source in every run (docs/performance.md).
$(VENV)/.installed: requirements.txt pyproject.toml | needs-venv
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -q uv==0.13.9 && $(VENV)/bin/uv pip install --compile-bytecode -p $(VENV)/bin/python -r requirements.txt
	touch $@

# The node image molecule boots; built without a registry when none answers.
image: needs-docker
	molecule/image/build.sh

# Every suite a scenario boots, built while lint and unit run (`make test`).
images: needs-docker
	molecule/image/build.sh bookworm
	molecule/image/build.sh trixie

up: setup image
	ansible-playbook playbooks/sandbox_up.yml -e sandbox_workers=$(WORKERS)
	ansible-playbook -i $(SANDBOX_INVENTORY) cluster-up.yml -e debug_mode=$(MODE)

down: setup
	ansible-playbook playbooks/sandbox_down.yml

probe: setup
	ansible-playbook -i $(INVENTORY) playbooks/debug_probe.yml

# Every node's evidence of a hang in one archive under the cluster's artifacts; JOB=ID (a
# submission or Ray job id) takes that job's logs instead of the whole session's.
evidence: setup
	ansible-playbook -i $(INVENTORY) playbooks/evidence.yml $(if $(JOB),-e ray_evidence_job=$(JOB))

lint: setup
	yamllint --strict .
	ansible-lint
	ruff check .
	ruff format --check .
	ansible-playbook --syntax-check cluster-up.yml cluster-down.yml

# Both cores; a test stuck past its limit fails alone and the run goes on. A module marked
# with an xdist_group runs on one worker, so its module-scoped fixtures are made once.
controller: setup needs-gcc
	pytest -n 2 --dist loadgroup --timeout 300 tests/unit tests/integration tests/policy

# tools/prerequisites.sh's apt path, as root in a bare Debian 12 container.
host: setup image
	pytest -p no:cacheprovider --timeout 600 tests/host

# docs/roles.md from the roles' argument specs; a unit test fails when it is stale.
docs: setup
	python tools/role_docs.py

# Each scenario's nodes run Debian 12 (bookworm) unless named here: online runs on Debian 13
# (Python 3.13: Ray and debugpy, verl refused).
NODE_SUITE_online := trixie

molecule: needs-scans
	set -e; for scenario in $(SCENARIOS); do $(MAKE) --no-print-directory scenario-$$scenario; done

# Each scenario's containers and networks are named and addressed from its nodes.env, so
# that a scenario runs beside another cluster. Containers a cut-off run left behind are removed first:
# molecule's own opening destroy costs each scenario half a minute on a clean machine.
scenario-%: setup needs-docker needs-scans
	molecule/image/build.sh $(or $(NODE_SUITE_$*),bookworm)
	set -a; . molecule/$*/nodes.env; set +a; \
	for node in head worker1 worker2 outsider; do \
	  docker rm -f $$MOLECULE_NODE_PREFIX-$$node >/dev/null 2>&1 || true; \
	done; \
	molecule reset -s $* >/dev/null && \
	MOLECULE_NODE_SUITE=$(or $(NODE_SUITE_$*),bookworm) molecule test -s $*

# `make up` / `make probe` / `make down` as a newcomer runs them.
sandbox: setup image needs-scans
	pytest --durations 10 --timeout 1800 tests/sandbox

# Every stage under its own limit, the images built beside lint and unit, the scenarios one
# after another; ends with a table of the stages' wall times (tools/ci.py).
test:
	python3 -m tools.ci

# Timings live here, never in tests: writes docs/benchmarks.md and docs/benchmarks.png.
bench: setup image needs-rsync
	pip install --quiet -r bench/requirements.txt
	python -m bench.run $(BENCH_ARGS)

clean: down
	for scenario in $(SCENARIOS); do \
	  (set -a; . molecule/$$scenario/nodes.env; molecule destroy -s $$scenario) || true; \
	done
	rm -rf artifacts .cache
