# One entry point for people and CI. `make test` is the README's test command.
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
SCENARIOS ?= post_mortem legacy online

.PHONY: setup image lint unit molecule test clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r requirements.txt
	touch $@

# The node image molecule boots; built without a registry when none answers.
image:
	molecule/image/build.sh

lint: setup
	yamllint --strict .
	ansible-lint
	ruff check .
	ruff format --check .
	ansible-playbook --syntax-check cluster-up.yml cluster-down.yml

unit: setup
	pytest tests/unit

molecule: setup image
	set -e; for scenario in $(SCENARIOS); do molecule test -s $$scenario; done

test: lint unit molecule

clean:
	for scenario in $(SCENARIOS); do molecule destroy -s $$scenario || true; done
	rm -rf artifacts .cache
