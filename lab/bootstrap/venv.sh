#!/usr/bin/env bash
# Controller virtualenv (.venv) with the pinned toolchain, and the collections we
# depend on cut out of the `ansible` community wheel (Galaxy is not reachable here;
# users who have Galaxy use requirements.yml instead).
# Idempotent: a venv whose pins already match is left alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
ANSIBLE_PKG=${ANSIBLE_PKG:-ansible==14.5.0}   # 14.x pairs with ansible-core 2.21
COLLECTIONS=.ansible/collections/ansible_collections

pick_python() {
  # pyenv's shim refuses a bare python3.12 unless PYENV_VERSION names it
  for cand in "python3.12" "env PYENV_VERSION=3.12.1 python3.12" "python3.13" "python3"; do
    if $cand -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then echo "$cand"; return; fi
  done
  echo "no Python >= 3.12 found (ansible-core 2.21 needs it)" >&2; exit 1
}

stamp=$VENV/.pins-$(sha256sum requirements-dev.txt | cut -c1-16)
if [ ! -f "$stamp" ]; then
  PY=$(pick_python)
  $PY -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r requirements-dev.txt
  rm -f "$VENV"/.pins-*; touch "$stamp"
fi

if [ ! -f "$COLLECTIONS/.from-$ANSIBLE_PKG" ]; then
  mkdir -p .ansible/wheels "$COLLECTIONS"
  "$VENV/bin/pip" download -q --no-deps -d .ansible/wheels "$ANSIBLE_PKG"
  "$VENV/bin/python" - "$COLLECTIONS" <<'PY'
import glob, sys, zipfile
dest = sys.argv[1].rsplit("/ansible_collections", 1)[0]
wheel = sorted(glob.glob(".ansible/wheels/ansible-*.whl"))[-1]
wanted = tuple(f"ansible_collections/{c}/" for c in (
    "ansible/posix", "community/general", "containers/podman",
    "community/proxmox", "community/library_inventory_filtering_v1"))
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(wanted)]
    z.extractall(dest, names)
print(f"collections: {len(names)} files from {wheel}")
PY
  touch "$COLLECTIONS/.from-$ANSIBLE_PKG"
fi
# the checkout itself is eagle3.extraction (ansible.cfg points here)
mkdir -p "$COLLECTIONS/eagle3"
ln -sfn ../../../.. "$COLLECTIONS/eagle3/extraction"
