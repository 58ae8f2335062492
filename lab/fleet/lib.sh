# shellcheck shell=bash disable=SC2034  # settings used by the scripts that source this
# Shared settings of the local fleet scripts (sourced, not run).
# Everything the fleet makes is named lab-* / recorded under $LAB, so `make clean`
# can remove exactly that and nothing else.
LAB=${EAGLE3_LAB:-/var/lib/eagle3-lab}
FLEET_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$FLEET_DIR/../.." && pwd)
STANDINS=$REPO_DIR/lab/standins
mkdir -p "$LAB/cache" "$LAB/ssh" "$LAB/run"
log() { printf '[fleet] %s\n' "$*" >&2; }
SSH_KEY=$LAB/ssh/id_ed25519
TEMPLATE_NAME=debian-12-eagle3_amd64.tar
# where each container has the demo model (lab/fixtures/model)
DEMO_MODEL_DIR=/srv/models/demo
# the online trainer's inputs (lab/fixtures/online: target tokenizer and config, draft, vocab mapping, dataset)
DEMO_ONLINE_DIR=/srv/online-demo
# the fleet's IPv6 (ULA) /64: the switch is ${FLEET_IP6}1, container vmid N is ${FLEET_IP6}N
# (inventory/demo's proxmox_container_net gives net0 the same ip6)
FLEET_IP6=fd00:200::
fleet_rows() { grep -Ev '^\s*(#|$)' "$FLEET_DIR/fleet.conf" | awk -v k="$1" '$1 == k'; }

# ssh to a fleet address from the root netns, through the lab-ctl switch (-n: it
# must not eat the stdin of the `while read` loops that call it)
fleet_ssh() {
  local addr=$1; shift
  ssh -n -i "$SSH_KEY" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -o ConnectTimeout=5 -o "ProxyCommand=ip netns exec lab-ctl nc %h %p" "root@$addr" "$@"
}

# wait until something answers on addr:22 (from inside lab-ctl)
wait_ssh_port() {
  local addr=$1 tries=${2:-100}
  for _ in $(seq "$tries"); do
    ip netns exec lab-ctl nc -z -w 1 "$addr" 22 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
netns_exists() { [ -e "/run/netns/$1" ]; }
