# Entry points. `make demo` and `make test` are the README's two set-up commands.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
DEMO_OUT ?= demo-out

.PHONY: setup setup-runtime demo test lint bench hosts hosts-absent clean collection sanity

setup:
	./scripts/setup.sh

# What the demo needs: everything but the test and lint tools (a later `make setup` adds them).
setup-runtime:
	SGLANG_TUNE_SETUP_EXTRAS=tuner ./scripts/setup.sh

hosts: setup-runtime
	ansible-playbook playbooks/emulator_hosts.yml

hosts-absent:
	-ansible-playbook playbooks/emulator_hosts.yml -e emulator_hosts_state=absent

demo: setup-runtime
	./scripts/demo.sh $(DEMO_OUT)

test: setup
	./scripts/test.sh

lint: setup
	./scripts/test.sh lint

# The collection tarball (build/collection/sglang_tune-serving-<version>.tar.gz).
collection: setup
	ansible-galaxy collection build --force --output-path build/collection .

# ansible-test sanity on the built collection (part of `make lint`).
sanity: setup
	./scripts/sanity.sh

bench: setup
	./scripts/bench.sh

clean: hosts-absent
	rm -rf build .cache/ansible-tmp $(DEMO_OUT)
