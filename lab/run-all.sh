#!/usr/bin/env bash
# `make test`: every check of the project, in order, each timed. A failing step does
# not stop the others; the run fails if any step failed. Ends with a timing table.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

declare -a NAMES RCS SECS
step() {
  local name=$1; shift
  echo "===== $name: $*"
  local t0=$SECONDS
  "$@"; local rc=$?
  NAMES+=("$name"); RCS+=("$rc"); SECS+=($((SECONDS - t0)))
  echo "===== $name: $([ "$rc" = 0 ] && echo ok || echo "FAILED (rc $rc)") in $((SECONDS - t0)) s"
}

step fleet bash lab/fleet/up.sh
step ansible-lint ansible-lint --profile production
step sanity bash lab/sanity.sh
# the pytest parts are the Makefile's, so that `make pytest` runs exactly these
step pytest make -s --no-print-directory pytest-main
step pytest:rollout make -s --no-print-directory pytest-rollout
step pytest:multinode make -s --no-print-directory pytest-multinode
step pytest:extraction make -s --no-print-directory pytest-extraction
step pytest:monitoring make -s --no-print-directory pytest-monitoring
step pytest:faults make -s --no-print-directory pytest-faults
step pytest:online make -s --no-print-directory pytest-online
step pytest:torch make -s --no-print-directory pytest-torch
for config in molecule/*/molecule.yml; do
  scenario=$(basename "$(dirname "$config")")
  step "molecule:$scenario" molecule test -s "$scenario"
done

failed=0
printf '\n%-28s %8s  %s\n' STEP SECONDS RESULT
for i in "${!NAMES[@]}"; do
  printf '%-28s %8s  %s\n' "${NAMES[$i]}" "${SECS[$i]}" "$([ "${RCS[$i]}" = 0 ] && echo ok || echo FAILED)"
  [ "${RCS[$i]}" = 0 ] || failed=$((failed + 1))
done
printf '%-28s %8s\n' total "$SECONDS"
passed=$(( ${#NAMES[@]} - failed ))
echo "steps: ${passed} passed, ${failed} failed"
[ "$failed" = 0 ]
