# Two entry points (README): `make demo` and `make test`. Both do their whole set-up
# on a fresh Debian/Ubuntu machine as root: apt packages, the pinned controller venv,
# the local fleet (tests/fleet/).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test deps fleet clean distclean lint sanity pytest build

demo: fleet
	ansible-playbook extract.yml -i inventory/demo

test: deps
	bash tests/run-all.sh

deps:
	bash tests/bootstrap/apt.sh
	bash tests/bootstrap/venv.sh

fleet: deps
	bash tests/fleet/up.sh

lint: deps
	ansible-lint --profile production

sanity: deps
	bash tests/sanity.sh

pytest: deps
	pytest -q tests

build: deps
	ansible-galaxy collection build --force

# removes the fleet (containers, namespaces, processes); keeps caches and the venv
clean:
	bash tests/fleet/down.sh

distclean: clean
	rm -rf $(VENV) .ansible $${EAGLE3_LAB:-/var/lib/eagle3-lab}/cache
