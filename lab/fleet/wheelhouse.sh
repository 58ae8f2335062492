#!/usr/bin/env bash
# The fleet's offline package index, $LAB/wheelhouse: what inventory/demo's ml_env
# installs into each container (the containers reach no index). It holds
#   sglang 0.5.23   built from the real wheel's deepseek_v2.py (tests/patch/sglang_source.py):
#                   the file sglang_patch patches; the package refuses to be imported
#   eagle3-sglang-standin  the stand-in server (lab/standins/sglang_server), rebuilt
#                   when its source changes
#   CPU torch, aiohttp and their dependencies, for the containers' Python (Debian 12:
#                   3.11): what the stand-in's capture and the extraction job import
#   packaging       what ml_env installs into each venv for ansible.builtin.pip
#   SpecForge 0.2.0 and its pinned CPU set (roles/online_training/files/requirements-cpu.txt):
#                   the online trainer's venv (installed with --no-deps)
# Prints the directory. Needs the controller venv (.venv) and, once, PyPI and the CPU
# torch wheel on disk; everything downloaded is cached in $LAB/cache.
set -euo pipefail
# shellcheck source=lab/fleet/lib.sh
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

# packaging, which ml_env installs into every venv for ansible.builtin.pip
[ -n "$(find "$OUT" -maxdepth 1 -name 'packaging-*.whl' -print -quit)" ] ||
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$OUT" packaging==26.4 >&2

# The job's and the capture's libraries and Mooncake (mooncake_master; its aiohttp, requests and msgpack
# come as its dependencies), pinned as lab/bootstrap/torch-venv.sh pins them, for the
# containers' CPython 3.11 on x86_64 (pip download on the controller, whatever its Python).
# The CPU build of torch (2.13.0+cpu) is the one these machines' pip finds on disk
# (its find-links); PyTorch's own index is not reachable from them, and asking it costs
# five retries a package.
JOB_PINS=(torch==2.13.0 aiohttp==3.14.5 mooncake-transfer-engine-non-cuda==0.3.13.post1)
JOB_WHEELS=$LAB/cache/job-wheels
job_stamp=$JOB_WHEELS/.pins-$(printf '%s\n' "${JOB_PINS[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$job_stamp" ]; then
  log "wheelhouse: ${JOB_PINS[*]} and their dependencies for CPython 3.11 (cached in $JOB_WHEELS)"
  mkdir -p "$JOB_WHEELS"
  "$PYTHON" -m pip download --quiet --only-binary=:all: --dest "$JOB_WHEELS" \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any "${JOB_PINS[@]}" >&2
  rm -f "$JOB_WHEELS"/.pins-*
  touch "$job_stamp"
fi
# hard links when the cache shares the filesystem (no copy of torch's 190 MB)
for wheel in "$JOB_WHEELS"/*.whl; do
  [ -e "$OUT/$(basename "$wheel")" ] || ln "$wheel" "$OUT/" 2>/dev/null || cp "$wheel" "$OUT/"
done

# The online trainer's venv: exactly the role's pinned set, no dependencies resolved (SpecForge's metadata pins
# torch and sglang versions the CPU trainer does not use), cached by the set's hash.
TRAINER_PINS=$REPO_DIR/roles/online_training/files/requirements-cpu.txt
TRAINER_WHEELS=$LAB/cache/trainer-wheels
trainer_stamp=$TRAINER_WHEELS/.pins-$(sha256sum < "$TRAINER_PINS" | cut -c1-16)
if [ ! -f "$trainer_stamp" ]; then
  log "wheelhouse: the online trainer's pinned set for CPython 3.11 (cached in $TRAINER_WHEELS)"
  mkdir -p "$TRAINER_WHEELS"
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$TRAINER_WHEELS" \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -r "$TRAINER_PINS" >&2
  rm -f "$TRAINER_WHEELS"/.pins-*
  touch "$trainer_stamp"
fi
for wheel in "$TRAINER_WHEELS"/*.whl; do
  [ -e "$OUT/$(basename "$wheel")" ] || ln "$wheel" "$OUT/" 2>/dev/null || cp "$wheel" "$OUT/"
done

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
