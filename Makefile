# Two entry points (README): `make demo` and `make test`. Both do their whole set-up
# on a fresh Debian/Ubuntu machine as root: apt packages, the pinned controller venv,
# the local fleet (lab/fleet/).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test check deps fleet clean distclean lint sanity pytest pytest-main pytest-offline pytest-fleet pytest-pct pytest-rollout pytest-multinode pytest-extraction pytest-monitoring pytest-faults pytest-online pytest-torch build

# the servers, then a small extraction job (300 samples of tests/job/demo_dataset.py) whose
# progress table is shown until it is done, then the proof that every sample is there once
DEMO_DATASET = $${EAGLE3_LAB:-/var/lib/eagle3-lab}/demo-dataset.jsonl
DEMO_JOB = -i inventory/demo -e extraction_job_name=demo
demo: fleet
	python3 tests/job/demo_dataset.py --samples 300 --out $(DEMO_DATASET)
	ansible-playbook extract.yml $(DEMO_JOB) -e extraction_job_dataset=$(DEMO_DATASET)
	for i in $$(seq 100); do \
	  ansible-playbook playbooks/status.yml $(DEMO_JOB) -e status_until_complete=true && break; \
	  [ $$i = 100 ] && exit 1; sleep 3; \
	done
	ansible-playbook playbooks/verify.yml $(DEMO_JOB)

test: deps
	bash lab/run-all.sh

# the developers' inner loop, no fleet: ansible-lint, sanity, the controller's suites and the torch venv's (the
# job, the capture, the online mode), in two lanes side by side; `make test` runs it beside the fleet
check: deps
	bash lab/check.sh

deps:
	bash lab/bootstrap/apt.sh
	bash lab/bootstrap/venv.sh

fleet: deps
	bash lab/fleet/up.sh

lint: deps
	ansible-lint --profile production

sanity: deps
	bash lab/sanity.sh

# the pytest parts of `make test` (lab/run-all.sh runs each as a step, the first and the last in its check lane)
pytest: deps
	$(MAKE) --no-print-directory pytest-offline pytest-fleet pytest-pct pytest-rollout pytest-multinode pytest-extraction pytest-monitoring pytest-faults pytest-online pytest-torch

# every suite of the controller's venv (pytest.ini's testpaths) but the whole-fleet runs, the steps below
pytest-main: pytest-offline pytest-fleet pytest-pct

# the controller venv's suites that need no fleet (make check)
pytest-offline:
	pytest -q -m "not fleet and not torch"

# the controller venv's tests on the fleet that are not a whole-fleet scenario of their own, but ct4's
pytest-fleet:
	pytest -q -m "fleet and not whole_fleet and not torch" --ignore=tests/integration/test_pct_fleet.py

# ct4, the container reached through pct alone: its own step, which lab/run-all.sh runs beside the scenarios on ct1 to
# ct3 (none of them touches ct4; they call lab/fleet/up.sh with ct1 to ct3 only)
pytest-pct:
	pytest -q tests/integration/test_pct_fleet.py

# extract.yml on the whole fleet, through ansible-runner (cold, converged, faults, ...)
pytest-rollout:
	pytest -q tests/integration/test_rollout.py

# one server over two containers on two hypervisors beside a one-node server (after the rollout:
# it ends, as the rollout does, with every server stopped)
pytest-multinode:
	pytest -q tests/integration/test_multinode.py

# the extraction job on the whole fleet: 2,000 samples through every fault, read back with
# SpecForge's loader (in the torch venv)
pytest-extraction:
	bash lab/bootstrap/torch-venv.sh >/dev/null && pytest -q tests/integration/test_extraction_fleet.py

# the job watched by a real Prometheus on the fleet (the role monitoring): samples done equal to the status files,
# the no-progress alert fired by a shard stalled on purpose and cleared when it goes on, the dashboard's queries
pytest-monitoring:
	pytest -q tests/integration/test_monitoring_fleet.py

# the job's stall watchdog and capture checks on the whole fleet, each container's server made faulty by its
# inventory variables: a wedged server (stalled, restarted, stopped for good), a capture other than what the server
# returns (stopped before any sample), dumps all zero (rejected at the drain); then the servers rolled out again as
# the inventory has them
pytest-faults:
	pytest -q tests/integration/test_job_faults_fleet.py

# training while extracting on the whole fleet: Mooncake, the gateways, SpecForge's producer and the reader, a
# server killed mid-run, every sample once and equal to the files mode's, no hidden state on a disk; then the
# other faults (the master restarted, a container rebooted, the reader killed), each recovered by re-running extract.yml
pytest-online:
	bash lab/bootstrap/torch-venv.sh >/dev/null && pytest -q tests/integration/test_online_fleet.py tests/integration/test_online_faults.py

# tests/capture, tests/job and tests/online need torch, which exists as a CPU build for Python 3.11 only
pytest-torch:
	bash lab/bootstrap/torch-venv.sh && .venv-torch/bin/python -m pytest -q -p no:cacheprovider tests/capture tests/job tests/online

build: deps
	ansible-galaxy collection build --force

# removes the fleet (containers, namespaces, processes); keeps caches and the venv
clean:
	bash lab/fleet/down.sh

distclean: clean
	rm -rf $(VENV) .ansible $${EAGLE3_LAB:-/var/lib/eagle3-lab}/cache
