#!/usr/bin/env bash
# Bring the local fleet up: 2 stand-in Proxmox hypervisors and 3 LXC containers
# (lab/fleet/README.md); given container names (`up.sh ct1 ct3`), those containers only. Idempotent:
# what already runs is left alone, so a second run takes seconds. Stale pieces (a netns whose sshd died with the last session,
# a stopped container) are rebuilt or started.
set -euo pipefail
# shellcheck source=lab/fleet/lib.sh
. "$(dirname "$0")/lib.sh"

ensure_ssh_material() {
  mkdir -p /run/sshd
  [ -f "$SSH_KEY" ] || ssh-keygen -q -t ed25519 -N '' -C eagle3-lab -f "$SSH_KEY"
  install -m 0600 "$SSH_KEY.pub" "$LAB/ssh/authorized_keys"
  cat > "$LAB/ssh/sshd_config" <<CFG
Port 22
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $LAB/ssh/authorized_keys
UsePAM no
PrintMotd no
MaxStartups 100
MaxSessions 100
Subsystem sftp internal-sftp
AcceptEnv LANG LC_*
CFG
}

# lab-ctl: the switch every fleet host hangs off; the controller reaches it with
# `ip netns exec lab-ctl nc` and adds nothing to the root netns
ensure_switch() {
  netns_exists lab-ctl && return 0
  ip netns add lab-ctl
  ip -n lab-ctl link set lo up
  ip -n lab-ctl link add labbr0 type bridge
  ip -n lab-ctl addr add 10.200.0.1/24 dev labbr0
  ip -n lab-ctl link set labbr0 up
}

# the switch's IPv6 (the fleet is dual-stack: each container has $FLEET_IP6<vmid> too), so that
# `ip netns exec lab-ctl` reaches a server on a container's IPv6 address; added to a switch made
# before it, too
ensure_switch_ip6() {
  ip -n lab-ctl addr replace "${FLEET_IP6}1/64" dev labbr0 nodad
}

# The lab's bridges flood multicast: with snooping on and no MLD querier on the lab's wires, a
# bridge forgets a container's solicited-node group when its membership times out, and the
# neighbour solicitation that finds the container's IPv6 address is dropped (the controller's
# first request to [fd00:200::103] timed out, while IPv4 answered). A Proxmox site has a querier
# (its router) or floods; the lab floods. Set on every run: the switch and the nodes' vmbr0.
ensure_bridges_flood() {
  ip -n lab-ctl link set labbr0 type bridge mcast_snooping 0
  local name
  while read -r _ name _; do
    ip -n "lab-$name" link set vmbr0 type bridge mcast_snooping 0
  done < <(fleet_rows node)
}

# a path a hypervisor bind-mounts over must exist on the host; remember the ones
# we made so `make clean` removes exactly those
ensure_mountpoint() {
  [ -d "$1" ] && return 0
  mkdir -p "$1"
  echo "$1" >> "$LAB/run/mountpoints"
}

ensure_node() {
  local name=$1 addr=$2 dir=$LAB/nodes/$1 pidfile=$LAB/run/sshd-$1.pid
  mkdir -p "$dir/etc-pve/lxc" "$dir/lxc" "$dir/vz/template/cache" "$dir/sbin" "$dir/cgkeep"
  # write in place: the running overlay keeps seeing the same inode
  cat "$STANDINS/pct/pct" > "$dir/sbin/pct"; chmod 0755 "$dir/sbin/pct"
  ln -f "$TEMPLATE" "$dir/vz/template/cache/$TEMPLATE_NAME"
  { echo "127.0.0.1 localhost"; echo "$addr $name.lab $name"
    fleet_rows ct | awk '{print $3, $2}'; } > "$dir/hosts"
  if pid_alive "$pidfile" && netns_exists "lab-$name"; then return 0; fi

  log "starting hypervisor $name ($addr)"
  if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  netns_exists "lab-$name" && ip netns del "lab-$name"
  ip -n lab-ctl link del "v$name" 2>/dev/null || true
  ip netns add "lab-$name"
  ip -n "lab-$name" link set lo up
  ip -n "lab-$name" link add vmbr0 type bridge
  ip -n "lab-$name" addr add "$addr/24" dev vmbr0
  ip -n "lab-$name" link set vmbr0 up
  ip -n "lab-$name" link add uplink type veth peer name "v$name" netns lab-ctl
  ip -n "lab-$name" link set uplink master vmbr0 up
  ip -n lab-ctl link set "v$name" master labbr0 up
  ip -n "lab-$name" route add default via 10.200.0.1
  [ -f "$LAB/ssh/hostkey-$name" ] || ssh-keygen -q -t ed25519 -N '' -f "$LAB/ssh/hostkey-$name"
  ensure_mountpoint /etc/pve
  ensure_mountpoint /var/lib/vz
  mkdir -p /var/lib/lxc
  # `ip netns exec` would remount /sys without the cgroup tree LXC needs, and plain
  # nsenter keeps the host's /sys where vmbr0 is invisible: so enter the netns, then
  # in a private mount ns park the cgroups, mount a fresh sysfs, move them back.
  # setsid: a session of its own, so that the hypervisor outlives the shell that brought it up (in the shell's
  # process group, a signal to that group, such as a tool stopping the job that ran up.sh, took sshd with it)
  setsid nsenter --net="/run/netns/lab-$name" unshare --uts --mount --propagation private sh -c "
    set -e
    hostname $name
    mount --rbind /sys/fs/cgroup $dir/cgkeep
    mount -t sysfs sysfs /sys
    mount --move $dir/cgkeep /sys/fs/cgroup
    mount --bind $dir/hosts /etc/hosts
    mount --bind $dir/etc-pve /etc/pve
    mount --bind $dir/lxc /var/lib/lxc
    mount --bind $dir/vz /var/lib/vz
    mount -t overlay overlay -o lowerdir=$dir/sbin:/usr/sbin /usr/sbin
    exec /usr/sbin/sshd -D -e -f $LAB/ssh/sshd_config -h $LAB/ssh/hostkey-$name -o PidFile=none
  " > "$LAB/run/sshd-$name.log" 2>&1 &
  echo $! > "$pidfile"
  wait_ssh_port "$addr" || { cat "$LAB/run/sshd-$name.log" >&2; log "hypervisor $name: sshd did not come up"; exit 1; }
}

node_addr() { fleet_rows node | awk -v n="$1" '$2 == n {print $3}'; }

# what a container of the fleet has beside the template, then started when it is not running
provision_and_start() {
  local name=$1 node_addr=$2 vmid=$3 rootfs=$4
  # the stand-in nvidia-smi: refreshed each time so the fleet runs this checkout's
  bash "$STANDINS/nvidia_smi/install.sh" --root "$rootfs" --dev-files >/dev/null
  # the weights, pre-provisioned as on a real site (inventory/demo's sglang_server_model_path)
  rm -rf "$rootfs$DEMO_MODEL_DIR" && mkdir -p "$rootfs$DEMO_MODEL_DIR"
  cp "$REPO_DIR"/lab/fixtures/model/* "$rootfs$DEMO_MODEL_DIR/"
  # the online trainer's inputs (inventory/demo/group_vars/online_trainers.yml)
  rm -rf "$rootfs$DEMO_ONLINE_DIR" && mkdir -p "$rootfs$DEMO_ONLINE_DIR"
  cp -r "$REPO_DIR"/lab/fixtures/online/. "$rootfs$DEMO_ONLINE_DIR/"
  if [ "$(fleet_ssh "$node_addr" pct status "$vmid")" != "status: running" ]; then
    log "starting container $name"
    fleet_ssh "$node_addr" pct start "$vmid"
  fi
}

ensure_container() {
  local name=$1 addr=$2 node=$3 vmid=$4 node_addr rootfs conf net0 ip6
  node_addr=$(node_addr "$node")
  rootfs=$LAB/nodes/$node/lxc/$vmid/rootfs
  conf=$LAB/nodes/$node/etc-pve/lxc/$vmid.conf
  ip6=$FLEET_IP6$vmid/64
  if [ ! -f "$conf" ]; then
    log "creating container $name (vmid $vmid on $node)"
    fleet_ssh "$node_addr" pct create "$vmid" "local:vztmpl/$TEMPLATE_NAME" \
      --hostname "$name" --memory 4096 --swap 0 --cores 2 \
      --net0 "name=eth0,bridge=vmbr0,ip=$addr/24,gw=10.200.0.1,ip6=$ip6" \
      --ssh-public-keys "$SSH_KEY.pub"
  fi
  # a container made before the fleet had IPv6 gets it on net0 (as inventory/demo's net0 has it):
  # a running one takes it as a pending change, at a reboot
  net0=$(awk '/^\[/ {exit} /^net0: / {sub(/^net0: /, ""); print}' "$conf")
  if [[ ",$net0," != *",ip6=$ip6,"* ]]; then
    log "container $name: net0 gets ip6=$ip6 (a restart)"
    fleet_ssh "$node_addr" pct set "$vmid" --net0 "$(printf '%s' "$net0" | sed -E 's/(^|,)ip6=[^,]*//g'),ip6=$ip6"
    if [ "$(fleet_ssh "$node_addr" pct status "$vmid")" = "status: running" ]; then
      fleet_ssh "$node_addr" pct reboot "$vmid"
    fi
  fi
  provision_and_start "$name" "$node_addr" "$vmid" "$rootfs"
  wait_ssh_port "$addr" 150 || { log "container $name: sshd did not come up"; exit 1; }
}

# A container reached only through its hypervisor (fleet.conf kind `pct`): no network interface
# and sshd masked, as many Proxmox containers run; inventory/demo-pct reaches it with
# community.proxmox.proxmox_pct_remote (SSH to the node, then `pct exec`).
ensure_pct_container() {
  local name=$1 node=$2 vmid=$3 node_addr rootfs conf
  node_addr=$(node_addr "$node")
  rootfs=$LAB/nodes/$node/lxc/$vmid/rootfs
  conf=$LAB/nodes/$node/etc-pve/lxc/$vmid.conf
  if [ ! -f "$conf" ]; then
    log "creating container $name (vmid $vmid on $node, no network: reached through pct only)"
    fleet_ssh "$node_addr" pct create "$vmid" "local:vztmpl/$TEMPLATE_NAME" \
      --hostname "$name" --memory 4096 --swap 0 --cores 2
  fi
  provision_and_start "$name" "$node_addr" "$vmid" "$rootfs"
  local tries
  for tries in $(seq 150); do
    fleet_ssh "$node_addr" pct exec "$vmid" -- /bin/true 2>/dev/null && break
    [ "$tries" = 150 ] && { log "container $name: pct exec does not answer"; exit 1; }
    sleep 0.2
  done
  # masked, not only stopped: the restart extract.yml gives it (its /dev/shm) must not start it again
  fleet_ssh "$node_addr" pct exec "$vmid" -- systemctl mask --now ssh.service ssh.socket >/dev/null 2>&1
  # a first boot may still be making the host keys (ssh.service's ExecStartPre) when it is stopped: that leaves it
  # "failed", where a container that runs no sshd shows "inactive"
  fleet_ssh "$node_addr" pct exec "$vmid" -- systemctl reset-failed ssh.service ssh.socket >/dev/null 2>&1 || true
  if fleet_ssh "$node_addr" pct exec "$vmid" -- systemctl is-active --quiet ssh.service; then
    log "container $name: sshd still runs"; exit 1
  fi
}

# one `up` at a time: molecule scenarios and tests may call it together
exec 9> "$LAB/run/up.lock"
flock 9
TEMPLATE=$(bash "$FLEET_DIR/rootfs.sh" | tail -n 1)
ensure_ssh_material
ensure_switch
ensure_switch_ip6
bash "$FLEET_DIR/wheelhouse.sh" >/dev/null
while read -r _ name addr; do ensure_node "$name" "$addr"; done < <(fleet_rows node)
ensure_bridges_flood
# The hosts named on the command line, or every one. The hypervisors and the switch are always made; a container
# is converged only when named (or when none is): a test that remade ct1 to ct3 converges those alone, so that ct4,
# which a test running beside it stops and starts on purpose (test_pct_fleet.py), is left as it is; `up.sh pve1`
# converges no container (molecule's proxmox_container, which needs pve1 alone, beside tests that stop containers).
wanted() { [ "${#WANTED[@]}" = 0 ] || [[ " ${WANTED[*]} " == *" $1 "* ]]; }
WANTED=("$@")
for name in "${WANTED[@]}"; do
  grep -Ev '^\s*(#|$)' "$FLEET_DIR/fleet.conf" | awk '{print $2}' | grep -qx -- "$name" ||
    { log "up.sh: no host $name in fleet.conf"; exit 2; }
done
while read -r _ name addr node vmid; do
  if wanted "$name"; then ensure_container "$name" "$addr" "$node" "$vmid"; fi
done < <(fleet_rows ct)
while read -r _ name _ node vmid; do
  if wanted "$name"; then ensure_pct_container "$name" "$node" "$vmid"; fi
done < <(fleet_rows pct)
log "fleet is up: $(fleet_rows node | wc -l) hypervisors, $(fleet_rows ct | wc -l) containers," \
  "$(fleet_rows pct | wc -l) reached through pct only"
