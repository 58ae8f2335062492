#!/usr/bin/env bash
# Virtualenv for the capture-module tests: CPU torch exists only for Python 3.11
# (`pip install torch==2.13.0` takes the CPU wheel that lies on these machines),
# so this is a second venv next to the controller's .venv (Python 3.12).
# Idempotent: a venv whose pins already match is left alone.
# Usage: tests/capture/venv.sh   -> prints the venv's python path
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${TORCH_VENV:-.venv-torch}
PINS=("torch==2.13.0" "pytest==9.2.0" "pyyaml==6.0.4")

pick_python() {
  # the system interpreter, not pyenv's shim: the CPU wheel is cp311
  for cand in /usr/bin/python3.11 python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
      "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "$cand"; return
    fi
  done
  echo "no Python 3.11 found (the CPU torch wheel is built for 3.11 only)" >&2; exit 1
}

stamp=$VENV/.pins-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  PY=$(pick_python)
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "${PINS[@]}"
  rm -f "$VENV"/.pins-*
  touch "$stamp"
fi
echo "$VENV/bin/python"
