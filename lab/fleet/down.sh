#!/usr/bin/env bash
# Remove everything lab/fleet/up.sh made, by name or recorded PID, nothing else:
# the containers of the fleet's hypervisors, their sshd, the lab-* network
# namespaces, the ssh proxies into them, and the mount points up.sh created.
# The cached rootfs template stays (remove $LAB/cache for a rebuild).
set -uo pipefail
# shellcheck source=lab/fleet/lib.sh
. "$(dirname "$0")/lib.sh"

# host PIDs of an LXC container named <vmid> (payload and monitor cgroups)
container_pids() {
  grep -lE "/lxc\.(payload|monitor)\.$1(/|$)" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3
}

stop_containers() {
  local node=$1 addr=$2 conf vmid
  for conf in "$LAB/nodes/$node/etc-pve/lxc/"*.conf; do
    [ -f "$conf" ] || continue
    vmid=$(basename "$conf" .conf)
    # through the node's own pct while it answers; by cgroup when it does not
    if pid_alive "$LAB/run/sshd-$node.pid"; then
      fleet_ssh "$addr" "pct stop $vmid" >/dev/null 2>&1
    fi
    mapfile -t pids < <(container_pids "$vmid")
    [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null
  done
}

kill_sshd() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  # per-connection children would keep the deleted netns (and its veth) alive
  pkill -P "$pid" 2>/dev/null
  kill "$pid" 2>/dev/null
  rm -f "$pidfile"
}

while read -r _ name addr; do
  stop_containers "$name" "$addr"
  kill_sshd "$LAB/run/sshd-$name.pid"
  netns_exists "lab-$name" && ip netns del "lab-$name"
done < <(fleet_rows node)
netns_exists lab-ctl && ip netns del lab-ctl
# ssh ControlPersist masters proxy through `nc 10.200.0.x 22` inside lab-ctl
ps -eo pid=,args= | awk '$2 == "nc" && $(NF-1) ~ /^10\.200\.0\.[0-9]+$/ && $NF == "22" {print $1}' | xargs -r kill 2>/dev/null
rm -rf "$LAB/nodes"
if [ -f "$LAB/run/mountpoints" ]; then
  while read -r dir; do rmdir "$dir" 2>/dev/null; done < "$LAB/run/mountpoints"
fi
rm -rf "$LAB/run"
log "fleet removed (cache kept in $LAB/cache)"
true
