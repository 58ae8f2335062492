#!/usr/bin/env bash
# The fleet's offline package index, $LAB/wheelhouse: what inventory/demo's ml_env
# installs into each container (the containers reach no index). It holds
#   sglang 0.5.23   built from the real wheel's deepseek_v2.py (tests/patch/sglang_source.py):
#                   the file sglang_patch patches; the package refuses to be imported
#   eagle3-sglang-standin  the stand-in server (tests/standins/sglang_server), rebuilt
#                   when its source changes
# Prints the directory. Needs the controller venv (.venv) and, once, PyPI for the
# sglang wheel and setuptools (both cached).
set -euo pipefail
# shellcheck source=tests/fleet/lib.sh
. "$(dirname "$0")/lib.sh"
PYTHON=$REPO_DIR/.venv/bin/python
OUT=$LAB/wheelhouse
BUILD=$LAB/cache/wheel-build
mkdir -p "$OUT" "$BUILD"

if [ ! -f "$OUT/sglang-0.5.23-py3-none-any.whl" ]; then
  log "wheelhouse: sglang 0.5.23 (the real deepseek_v2.py)"
  "$PYTHON" "$REPO_DIR/tests/patch/sglang_source.py" fake-wheel --version 0.5.23 --source-version 0.5.23 --out "$OUT" >&2
fi

# setuptools for the offline build of the stand-in
[ -n "$(find "$BUILD" -maxdepth 1 -name 'setuptools-*.whl' -print -quit)" ] ||
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$BUILD" setuptools==80.9.0 >&2

src=$STANDINS/sglang_server
hash=$(cd "$src" && find . -type f ! -path '*/__pycache__/*' ! -path '*.egg-info*' -print0 | sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$OUT/.standin-hash" 2>/dev/null)" != "$hash" ]; then
  log "wheelhouse: eagle3-sglang-standin (source $hash)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # built from a copy: the build leaves nothing in the checkout
  cp -r "$src" "$tmp/src"
  "$PYTHON" -m pip wheel --quiet --no-deps --no-index --find-links "$BUILD" --wheel-dir "$OUT" "$tmp/src" >&2
  echo "$hash" > "$OUT/.standin-hash"
fi
echo "$OUT"
