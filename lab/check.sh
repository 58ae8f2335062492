#!/usr/bin/env bash
# `make check`: what needs no fleet, the developers' inner loop (README): ansible-lint then sanity; the controller
# venv's suites that need no fleet; the torch venv's (the job, the capture, the online mode). Alone, in two lanes
# side by side on the two cores (the torch suites; the rest). lab/run-all.sh runs it
# with --one-lane as its check lane, one step after another beside the fleet's: three more lanes there would take
# the CPU the fleet's scenarios and the timing tests of tests/capture and tests/job need (seen: a load of 7, a
# capture test past its 30 s deadline).
# Usage: lab/check.sh [--one-lane] [RESULTS_FILE]   with a file, appends its steps' rows there (lab/steps.sh) and
#                                                   prints no table; without, prints the table and fails when a step
#                                                   failed
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
# shellcheck source=lab/steps.sh
. lab/steps.sh

one_lane=
if [ "${1:-}" = --one-lane ]; then one_lane=1; shift; fi
results=${1:-}
own=
if [ -z "$results" ]; then
  own=$(mktemp -d "${TMPDIR:-/tmp}/check.XXXXXX")
  trap 'rm -rf "$own"' EXIT
  results=$own/check
fi
bash lab/bootstrap/torch-venv.sh >/dev/null

lint() {
  step_to "$1" ansible-lint ansible-lint --profile production
  step_to "$1" sanity bash lab/sanity.sh
}
offline() { step_to "$1" pytest:offline make -s --no-print-directory pytest-offline; }
torch() { step_to "$1" pytest:torch make -s --no-print-directory pytest-torch; }

if [ -n "$one_lane" ]; then
  lint "$results"; offline "$results"; torch "$results"
else
  # two lanes, one a core: the torch suites (their timing tests: a capture test went past its 30 s deadline with
  # three lanes on two cores) beside the rest
  ( { lint "$results.lint"; offline "$results.lint"; } 2>&1 | sed -u 's/^/[lint] /' ) &
  lint_pid=$!
  torch "$results.torch"
  wait "$lint_pid"
  cat "$results.lint" "$results.torch" >> "$results" 2>/dev/null
  rm -f "$results.lint" "$results.torch"
fi
[ -z "$own" ] || print_table "$SECONDS" "$results"
