#!/usr/bin/env bash
# `make check`: what needs no fleet, the developers' inner loop (README), in three lanes side by side on the two
# cores (each waits in part: on subprocesses, sockets, timeouts): ansible-lint then sanity; the controller venv's
# suites that need no fleet; the torch venv's (the job, the capture, the online mode). lab/run-all.sh runs it as its
# check lane, beside the fleet.
# Usage: lab/check.sh [RESULTS_FILE]   with a file, appends its steps' rows there (lab/steps.sh) and prints no
#                                       table; without, prints the table and fails when a step failed
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
# shellcheck source=lab/steps.sh
. lab/steps.sh

results=${1:-}
own=
if [ -z "$results" ]; then
  own=$(mktemp -d "${TMPDIR:-/tmp}/check.XXXXXX")
  trap 'rm -rf "$own"' EXIT
  results=$own/check
fi
bash lab/bootstrap/torch-venv.sh >/dev/null

lint_lane() {
  step_to "$1" ansible-lint ansible-lint --profile production
  step_to "$1" sanity bash lab/sanity.sh
}
( lint_lane "$results.lint" 2>&1 | sed -u 's/^/[lint] /' ) &
lint_pid=$!
( step_to "$results.offline" pytest:offline make -s --no-print-directory pytest-offline 2>&1 | sed -u 's/^/[offline] /' ) &
offline_pid=$!
step_to "$results.torch" pytest:torch make -s --no-print-directory pytest-torch
wait "$lint_pid" "$offline_pid"
cat "$results.lint" "$results.offline" "$results.torch" >> "$results" 2>/dev/null
rm -f "$results.lint" "$results.offline" "$results.torch"
[ -z "$own" ] || print_table "$SECONDS" "$results"
