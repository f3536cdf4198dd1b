# Entry points. `make demo` and `make test` are the README's two set-up commands.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
DEMO_OUT ?= demo-out

.PHONY: setup demo test lint unit integration e2e bench hosts hosts-absent clean

setup:
	./scripts/setup.sh

hosts: setup
	ansible-playbook playbooks/emulator_hosts.yml

hosts-absent:
	-ansible-playbook playbooks/emulator_hosts.yml -e emulator_hosts_state=absent

demo: setup
	./scripts/demo.sh $(DEMO_OUT)

test: setup
	./scripts/test.sh

lint: setup
	./scripts/test.sh lint

bench: setup
	./scripts/bench.sh

clean: hosts-absent
	rm -rf build .cache/ansible-tmp $(DEMO_OUT)
