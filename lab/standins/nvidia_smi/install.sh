#!/usr/bin/env bash
# Installs the stand-in nvidia-smi into a root filesystem (a container's rootfs) or,
# with the default --root /, into the running host. Tests only: see README.md here.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: install.sh [--root DIR] [--gpus N] [--interconnect nvlink|pcie] [--dev-files]
       install.sh [--root DIR] --uninstall   remove /usr/bin/nvidia-smi only (a missing binary)
       install.sh [--root DIR] --purge       remove everything install.sh put there
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FIXTURES=$HERE/../../fixtures/nvidia-smi
# The captures the script reads at run time (failure texts, topo legend, the -q -x XML).
DATA_FILES="reported/driver-library-mismatch.txt reported/driver-not-loaded.txt
  h200x2/idle/topo-m.txt h200x2/idle/nvidia-smi-q.xml"

ROOT=/ ACTION=install DEV_FILES=0 SETTINGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --root) ROOT=$2; shift 2 ;;
    --gpus) SETTINGS+=("gpus=$2"); shift 2 ;;
    --interconnect) SETTINGS+=("interconnect=$2"); shift 2 ;;
    --dev-files) DEV_FILES=1; shift ;;
    --uninstall) ACTION=uninstall; shift ;;
    --purge) ACTION=purge; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
ROOT=${ROOT%/}
DATA=$ROOT/usr/share/nvidia-smi-standin
TMPFILES=$ROOT/etc/tmpfiles.d/nvidia-smi-standin.conf
# The control CLI run from this checkout, but on the target's config file.
control() { NVIDIA_SMI_STANDIN_CONF=$ROOT/etc/nvidia-smi-standin.conf python3 "$HERE/nvidia-smi-standin" "$@"; }

# Plain files standing in for the GPU device nodes, so that holders can open them and
# fd scans (fuser, /proc/<pid>/fd) find them. A container's /dev is a fresh tmpfs at
# every boot, so they are declared to systemd-tmpfiles ('f': create if absent) and, on
# the running host, created now.
install_dev_files() {
  control devices | while read -r dev; do echo "f $dev 0666 root root -"; done >"$TMPFILES.new"
  mv "$TMPFILES.new" "$TMPFILES"
  if [ -z "$ROOT" ]; then
    control devices | while read -r dev; do [ -e "$dev" ] || install -m 0666 /dev/null "$dev"; done
  fi
}

case $ACTION in
  install)
    install -D -m 0755 "$HERE/nvidia-smi" "$ROOT/usr/bin/nvidia-smi"
    # A second copy, not a link, so that --uninstall leaves the control CLI working.
    install -D -m 0755 "$HERE/nvidia-smi" "$ROOT/usr/bin/nvidia-smi-standin"
    for f in $DATA_FILES; do install -D -m 0644 "$FIXTURES/$f" "$DATA/$f"; done
    if [ ${#SETTINGS[@]} -gt 0 ]; then control set "${SETTINGS[@]}"; fi
    if [ $DEV_FILES = 1 ]; then mkdir -p "$(dirname "$TMPFILES")"; install_dev_files; fi
    ;;
  uninstall)
    rm -f "$ROOT/usr/bin/nvidia-smi"
    ;;
  purge)
    if [ -z "$ROOT" ] && [ -f "$TMPFILES" ]; then
      # Only the plain files made above; a real device node is never touched.
      awk '{print $2}' "$TMPFILES" | while read -r dev; do [ ! -f "$dev" ] || rm -f "$dev"; done
      rm -rf /run/nvidia-smi-standin
    fi
    rm -rf "$DATA"
    rm -f "$ROOT/usr/bin/nvidia-smi" "$ROOT/usr/bin/nvidia-smi-standin" \
      "$ROOT/etc/nvidia-smi-standin.conf" "$TMPFILES"
    ;;
esac
