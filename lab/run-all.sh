#!/usr/bin/env bash
# `make test`: every check of the project, each step timed, in lanes that run side by side (tests/README.md,
# "Where the time goes"):
#   fleet         the local fleet and what runs on ct1 to ct3: the fleet's own tests, the whole-fleet scenarios,
#                 molecule's gpu_check and sglang_server. Mostly waiting (ansible over SSH, systemd restarts, the
#                 stand-in servers' paced forward passes).
#   fleet.beside  what never touches what the fleet lane does: ct4's test, molecule's proxmox_container, then (once
#                 the rollout test, which remakes ct1, is over) molecule's ml_env and sglang_patch.
#   check         what needs no fleet: `make check` (ansible-lint, sanity, the controller's and the torch venv's
#                 suites), one step after another, started at once in the background.
# Before the lanes: what all use, built once (the torch venv and the fleet's template side by side, then its
# wheelhouse). A failing step does not stop the others; the run fails if any step failed. Ends with one timing
# table of every lane.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
# shellcheck source=lab/steps.sh
. lab/steps.sh

RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/run-all.XXXXXX")
trap 'rm -rf "$RESULTS"' EXIT

# once, before the lanes: the torch venv (the check lane's tests/capture, tests/job and tests/online; the fleet
# lane's output checks, read with SpecForge's loader), the fleet's template (the containers' root file system, which
# the check lane's tests/standins/test_pct_standin.py unpacks too) and its wheelhouse (the containers' packages)
# (the template, debootstrap from the apt mirror, beside the torch venv, pip from the index)
( step_to "$RESULTS/setup.rootfs" rootfs bash lab/fleet/rootfs.sh 2>&1 | sed -u 's/^/[rootfs] /' ) &
rootfs_pid=$!
step_to "$RESULTS/setup" torch-venv bash lab/bootstrap/torch-venv.sh
wait "$rootfs_pid"
cat "$RESULTS/setup.rootfs" >> "$RESULTS/setup" 2>/dev/null
step_to "$RESULTS/setup" wheelhouse bash lab/fleet/wheelhouse.sh

# the check lane (make check, its steps one after another): its output prefixed, so that a CI log tells the lanes
# apart while they run
# (niced: it has some twenty minutes to spare, the fleet's scenarios, which set the run's length, have none)
( nice -n 5 bash lab/check.sh --one-lane "$RESULTS/check" 2>&1 | sed -u 's/^/[check] /' ) &
check_pid=$!

# the molecule scenarios of a role alone on ct1 that the fleet's scenarios leave be (lab/run-all.sh's lane beside)
BESIDE_ON_CT1=(ml_env sglang_patch)

fleet_lane() {
  local out=$1
  step_to "$out" fleet bash lab/fleet/up.sh
  # the pytest parts are the Makefile's, so that `make pytest` runs exactly these
  step_to "$out" pytest:fleet make -s --no-print-directory pytest-fleet
  # Beside the scenarios on ct1 to ct3, what never touches what they do: ct4 (reached through pct alone); molecule's
  # proxmox_container (its own CT 150 on pve1; its create names pve1 alone); once the rollout test, which destroys
  # and remakes ct1, is over, molecule's ml_env and sglang_patch (each in a dir of its own on ct1, no server, no GPU;
  # their create names ct1 alone)
  ( step_to "$out.beside" pytest:pct make -s --no-print-directory pytest-pct
    step_to "$out.beside" molecule:proxmox_container molecule test -s proxmox_container
    while [ ! -e "$out.rollout-done" ]; do sleep 2; done
    for scenario in "${BESIDE_ON_CT1[@]}"; do
      step_to "$out.beside" "molecule:$scenario" env EAGLE3_FLEET_UP=ct1 molecule test -s "$scenario"
    done ) 2>&1 | sed -u 's/^/[beside] /' &
  local beside_pid=$!
  step_to "$out" pytest:rollout make -s --no-print-directory pytest-rollout
  touch "$out.rollout-done"
  step_to "$out" pytest:multinode make -s --no-print-directory pytest-multinode
  step_to "$out" pytest:extraction make -s --no-print-directory pytest-extraction
  step_to "$out" pytest:monitoring make -s --no-print-directory pytest-monitoring
  step_to "$out" pytest:faults make -s --no-print-directory pytest-faults
  step_to "$out" pytest:online make -s --no-print-directory pytest-online
  # the other molecule scenarios' create brings every container up (lab/fleet/up.sh), ct4 included: not while its
  # test runs
  wait "$beside_pid"
  local config scenario
  for config in molecule/*/molecule.yml; do
    scenario=$(basename "$(dirname "$config")")
    [[ " proxmox_container ${BESIDE_ON_CT1[*]} " == *" $scenario "* ]] && continue   # in the lane beside, above
    step_to "$out" "molecule:$scenario" molecule test -s "$scenario"
  done
}
fleet_lane "$RESULTS/fleet"
wait "$check_pid"

print_table "$SECONDS" "$RESULTS/setup" "$RESULTS/check" "$RESULTS/fleet" "$RESULTS/fleet.beside"
