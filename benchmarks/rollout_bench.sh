#!/usr/bin/env bash
# extract.yml on the local fleet (lab/fleet/), timed: wall seconds, median of REPEAT runs
# (default 5) of each case, each ratio's two cases run in turn, after one unmeasured run that converges
# the fleet.
#   converged re-run  vs  a no-op play (one ping on the same hosts)    goal <= 1.5x
#   every role (extract_force) on 1 container: tasks and seconds       goal <= 50 tasks, <= 20 s
#   3 hosts           vs  1 host (with its hypervisor), every role (extract_force) and
#                         converged                                  goal <= 1.5x
# Prints a Markdown table (docs/benchmarks.md has the last one).
#   bash benchmarks/rollout_bench.sh        (needs `make fleet`)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.venv/bin:$PATH ANSIBLE_CONFIG=$PWD/ansible.cfg
REPEAT=${REPEAT:-5}

playbook() { ansible-playbook -i inventory/demo "$@" >/dev/null; }

# tasks a host ran in one play run: ok (changed included) + skipped + rescued + failed of its recap line
tasks_of() {
  local host=$1; shift
  ansible-playbook -i inventory/demo "$@" | awk -v h="$host" '$1 == h && $2 == ":" {
    for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] ~ /^(ok|skipped|rescued|failed)$/) n += kv[2] }
    print n }'
}

# wall seconds of one run of a command
once() {
  local t0
  t0=$(date +%s.%N)
  "$@" >/dev/null || { echo "failed: $*" >&2; exit 1; }
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {print a - b}'
}

median() { sort -n | awk '{a[NR] = $1} END {printf "%.2f", a[int((NR + 1) / 2)]}'; }

# "A B": the median wall seconds of REPEAT runs of each of two playbook runs (the arguments of each, as
# one string), taken in turn, A then B, so that the machine's pace, which drifts on a shared 2-core
# host, weighs on both alike
paired() {
  local i a=() b=()
  for ((i = 0; i < REPEAT; i++)); do
    # shellcheck disable=SC2086
    a+=("$(once playbook $1)")
    # shellcheck disable=SC2086
    b+=("$(once playbook $2)")
  done
  echo "$(printf '%s\n' "${a[@]}" | median) $(printf '%s\n' "${b[@]}" | median)"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "converging the fleet (unmeasured)" >&2
playbook extract.yml

read -r noop rerun < <(paired benchmarks/noop.yml extract.yml)
read -r one three < <(paired "extract.yml --limit ct1,pve1,localhost -e extract_force=true" "extract.yml -e extract_force=true")
read -r one_conv rerun3 < <(paired "extract.yml --limit ct1,pve1,localhost" extract.yml)
one_tasks=$(tasks_of ct1 extract.yml --limit ct1,pve1,localhost -e extract_force=true)

cat <<TABLE
| case | seconds (median of $REPEAT) | ratio | goal |
| --- | ---: | ---: | --- |
| no-op play: one ping on 2 hypervisors + 3 containers | $noop | 1 | |
| extract.yml, converged re-run, 3 containers | $rerun | $(ratio "$rerun" "$noop") x no-op | <= 1.5x |
| extract.yml, every role (extract_force), 1 container ($one_tasks tasks on it) | $one | 1 | <= 20 s, <= 50 tasks |
| extract.yml, every role (extract_force), 3 containers | $three | $(ratio "$three" "$one") x 1 container | <= 1.5x |
| extract.yml, converged re-run, 1 container | $one_conv | 1 | |
| extract.yml, converged re-run, 3 containers (paired with the row above) | $rerun3 | $(ratio "$rerun3" "$one_conv") x 1 container | <= 1.5x |
TABLE
