#!/usr/bin/env bash
# `make test`: every check of the project, each step timed, in lanes that run side by side (tests/README.md,
# "Where the time goes"):
#   fleet         the local fleet and what runs on ct1 to ct3: the fleet's own tests, the whole-fleet scenarios,
#                 molecule's gpu_check and sglang_server. Mostly waiting (ansible over SSH, systemd restarts, the
#                 stand-in servers' paced forward passes): it sets the run's length.
#   fleet.beside  what never touches what the fleet lane does: ct4's test, molecule's proxmox_container, ml_env and
#                 sglang_patch. Niced, from the end of the rollout test on.
#   check         what needs no fleet: `make check` (ansible-lint, sanity, the controller's and the torch venv's
#                 suites), one step after another. Niced, from the end of the rollout test on.
# Before the lanes: what all use, built once (the torch venv and the wheelhouse beside the fleet's template). A
# failing step does not stop the others; the run fails if any step failed. Ends with one timing table of every lane.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
# shellcheck source=lab/steps.sh
. lab/steps.sh

RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/run-all.XXXXXX")
trap 'rm -rf "$RESULTS"' EXIT

# once, before the lanes: the fleet's template (the containers' root file system: debootstrap from the apt mirror,
# which the check lane's tests/standins/test_pct_standin.py unpacks too) beside the torch venv (the check lane's
# tests/capture, tests/job and tests/online; the fleet lane's output checks, read with SpecForge's loader) and the
# fleet's wheelhouse (the containers' packages), both from pip
( step_to "$RESULTS/setup.rootfs" rootfs bash lab/fleet/rootfs.sh 2>&1 | sed -u 's/^/[rootfs] /' ) &
rootfs_pid=$!
step_to "$RESULTS/setup" torch-venv bash lab/bootstrap/torch-venv.sh
step_to "$RESULTS/setup" wheelhouse bash lab/fleet/wheelhouse.sh
wait "$rootfs_pid"
cat "$RESULTS/setup.rootfs" >> "$RESULTS/setup" 2>/dev/null

# the molecule scenarios of a role alone on ct1 that the fleet's scenarios leave be (the lane beside)
BESIDE_ON_CT1=(ml_env sglang_patch)

# What never touches what the fleet lane does: ct4 (reached through pct alone); molecule's proxmox_container (its
# own CT 150 on pve1; its create names pve1 alone); molecule's ml_env and sglang_patch (each in a dir of its own on
# ct1, no server, no GPU; their create names ct1 alone). Started once the rollout test, which remakes ct1 to ct3
# from bare containers and is the run's most CPU-bound step, is over.
beside_lane() {
  local out=$1 scenario
  renice -n 5 -p "$BASHPID" >/dev/null   # niced, as the check lane (below); what it starts is too
  step_to "$out" pytest:pct make -s --no-print-directory pytest-pct
  step_to "$out" molecule:proxmox_container molecule test -s proxmox_container
  for scenario in "${BESIDE_ON_CT1[@]}"; do
    step_to "$out" "molecule:$scenario" env EAGLE3_FLEET_UP=ct1 molecule test -s "$scenario"
  done
}

fleet_lane() {
  local out=$1
  step_to "$out" fleet bash lab/fleet/up.sh
  # the pytest parts are the Makefile's, so that `make pytest` runs exactly these
  step_to "$out" pytest:fleet make -s --no-print-directory pytest-fleet
  step_to "$out" pytest:rollout make -s --no-print-directory pytest-rollout
  # The lanes beside, niced: they have minutes to spare, the fleet's scenarios, which set the run's length, have
  # none (started with the fleet, the two made the rollout test a third slower; three lanes of make check beside it
  # put a load of 7 on two cores and a capture test past its deadline). Their output prefixed, so that a CI log
  # tells the lanes apart.
  ( nice -n 5 bash lab/check.sh --one-lane "$RESULTS/check" 2>&1 | sed -u 's/^/[check] /' ) &
  check_pid=$!
  ( beside_lane "$out.beside" 2>&1 | sed -u 's/^/[beside] /' ) &
  local beside_pid=$!
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
check_pid=
fleet_lane "$RESULTS/fleet"
[ -z "$check_pid" ] || wait "$check_pid"

print_table "$SECONDS" "$RESULTS/setup" "$RESULTS/check" "$RESULTS/fleet" "$RESULTS/fleet.beside"
