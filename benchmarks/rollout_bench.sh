#!/usr/bin/env bash
# extract.yml on the local fleet (lab/fleet/), timed: wall seconds and the machine's CPU seconds, median of
# REPEAT runs (default 5) of each case, each ratio's two cases run in turn, after one unmeasured run that converges
# the fleet.
#   converged re-run  vs  a no-op play (one ping on the same hosts)    goal <= 1.5x
#   every role (extract_force) on 1 container: tasks and seconds       goal <= 50 tasks, <= 20 s
#   3 hosts           vs  1 host (with its hypervisor), every role (extract_force) and
#                         converged                                  goal <= 1.5x
#   reference: 30 pings (benchmarks/pings.yml) on 3 containers vs 1: Ansible's own ratio on this machine
# Prints a Markdown table (docs/benchmarks.md has the last one), and the least the 3-container runs could take on
# this machine, whose cores the fleet's hosts share with the controller.
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

# CPU seconds the whole machine has spent (user, nice, system, irq, softirq of /proc/stat's first line): the
# fleet's hosts are this machine's processes, so this counts their module runs as well as the controller's
cpu_now() {
  local _ user nice system irq softirq
  # the fields: user nice system idle iowait irq softirq ...; idle and iowait are not CPU spent
  read -r _ user nice system _ _ irq softirq _ < /proc/stat
  echo $((user + nice + system + irq + softirq))
}

# "wall cpu": wall seconds and the machine's CPU seconds of one run of a command
once() {
  local t0 c0
  t0=$(date +%s.%N)
  c0=$(cpu_now)
  "$@" >/dev/null || { echo "failed: $*" >&2; exit 1; }
  awk -v a="$(date +%s.%N)" -v b="$t0" -v c="$(( $(cpu_now) - c0 ))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {print a - b, c / hz}'
}

median() { sort -n | awk '{a[NR] = $1} END {printf "%.2f", a[int((NR + 1) / 2)]}'; }

# "A B cpuA cpuB": the median wall seconds, then the median CPU seconds, of REPEAT runs of each of two
# playbook runs (the arguments of each, as one string), taken in turn, A then B, so that the machine's pace,
# which drifts on a shared 2-core host, weighs on both alike
paired() {
  local i run a=() b=() ca=() cb=()
  for ((i = 0; i < REPEAT; i++)); do
    # shellcheck disable=SC2086
    read -r -a run < <(once playbook $1)
    a+=("${run[0]}") ca+=("${run[1]}")
    # shellcheck disable=SC2086
    read -r -a run < <(once playbook $2)
    b+=("${run[0]}") cb+=("${run[1]}")
  done
  echo "$(printf '%s\n' "${a[@]}" | median) $(printf '%s\n' "${b[@]}" | median)" \
    "$(printf '%s\n' "${ca[@]}" | median) $(printf '%s\n' "${cb[@]}" | median)"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "converging the fleet (unmeasured)" >&2
playbook extract.yml

read -r noop rerun noop_cpu rerun_cpu < <(paired benchmarks/noop.yml extract.yml)
read -r one three one_cpu three_cpu < <(paired "extract.yml --limit ct1,pve1,localhost -e extract_force=true" \
  "extract.yml -e extract_force=true")
read -r one_conv rerun3 one_conv_cpu rerun3_cpu < <(paired "extract.yml --limit ct1,pve1,localhost" extract.yml)
read -r one_ping three_ping one_ping_cpu three_ping_cpu < <(paired "benchmarks/pings.yml --limit ct1" benchmarks/pings.yml)
one_tasks=$(tasks_of ct1 extract.yml --limit ct1,pve1,localhost -e extract_force=true)
cores=$(nproc)

# the least the 3-container run could take against the 1-container one on this machine: its CPU seconds
# spread over every core all the time, against the 1-container run's wall seconds
floor() { awk -v c="$1" -v n="$cores" -v w="$2" 'BEGIN {printf "%.2f", c / n / w}'; }

cat <<TABLE
| case | seconds (median of $REPEAT) | CPU seconds, all processes (median) | cores busy | ratio | goal |
| --- | ---: | ---: | ---: | ---: | --- |
| no-op play: one ping on 2 hypervisors + 3 containers | $noop | $noop_cpu | $(ratio "$noop_cpu" "$noop") | 1 | |
| extract.yml, converged re-run, 3 containers | $rerun | $rerun_cpu | $(ratio "$rerun_cpu" "$rerun") | $(ratio "$rerun" "$noop") x no-op | <= 1.5x |
| extract.yml, every role (extract_force), 1 container ($one_tasks tasks on it) | $one | $one_cpu | $(ratio "$one_cpu" "$one") | 1 | <= 20 s, <= 50 tasks |
| extract.yml, every role (extract_force), 3 containers | $three | $three_cpu | $(ratio "$three_cpu" "$three") | $(ratio "$three" "$one") x 1 container | <= 1.5x |
| extract.yml, converged re-run, 1 container | $one_conv | $one_conv_cpu | $(ratio "$one_conv_cpu" "$one_conv") | 1 | |
| extract.yml, converged re-run, 3 containers (paired with the row above) | $rerun3 | $rerun3_cpu | $(ratio "$rerun3_cpu" "$rerun3") | $(ratio "$rerun3" "$one_conv") x 1 container | <= 1.5x |
| reference: 30 pings (benchmarks/pings.yml), 1 container | $one_ping | $one_ping_cpu | $(ratio "$one_ping_cpu" "$one_ping") | 1 | |
| reference: 30 pings, 3 containers | $three_ping | $three_ping_cpu | $(ratio "$three_ping_cpu" "$three_ping") | $(ratio "$three_ping" "$one_ping") x 1 container | |

The least three containers can take against one on this machine ($cores cores, shared by the controller and the
fleet's hosts), their CPU seconds over $cores cores busy all the time against one container's wall seconds:
every role $(floor "$three_cpu" "$one")x, converged $(floor "$rerun3_cpu" "$one_conv")x, the pings $(floor "$three_ping_cpu" "$one_ping")x.
TABLE
