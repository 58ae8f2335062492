#!/usr/bin/env bash
# What SpecForge's own pipeline needs on the GPU machine beyond the SGLang kit of
# ../shared/recipes/real-sglang (lab/gpu/specforge_side_by_side.sh):
#   .kit/sf/wheels   specforge 0.2.0 (its scripts are not in the wheel) and yunchang,
#                    which its init_distributed imports; everything else it imports is in
#                    the SGLang kit or on the machine (accelerate, tensorboard, psutil)
#   .kit/sf/scripts  scripts/prepare_hidden_states.py of SpecForge's repository at the
#                    commit whose specforge/ matches the 0.2.0 wheel most closely
#                    (126 of its 134 modules equal, the rest newer)
#   .whl             ansible-core for the sglang_patch role (../shared/recipes/gpu-device.md)
# Usage: bash lab/gpu/specforge_kit.sh SPECFORGE_SNAPSHOT [WHEEL_DIR]
#   SPECFORGE_SNAPSHOT: a local snapshot of github.com/sgl-project/SpecForge holding the
#     commit below: a clone or a bare git dir (a mirror brought along with the kit); the
#     script never reaches the public host, which the machines here cannot
#   WHEEL_DIR: a folder holding the wheels already (specforge-0.2.0, yunchang-0.6.4,
#     ansible_core-2.21.5, resolvelib-1.2.0) for a machine with no package index either;
#     without it they come from the package index through pip
# Nothing of SpecForge is committed to this repository: .kit/ and .whl/ are git-ignored.
set -euo pipefail
SNAPSHOT=${1:-}
WHEELS=${2:-}
SPECFORGE_COMMIT=a6b6b0230009d15ec2a97a57384e6f53f0f96946
if [ -z "$SNAPSHOT" ]; then
  echo "usage: bash lab/gpu/specforge_kit.sh SPECFORGE_SNAPSHOT [WHEEL_DIR]" >&2
  echo "  SPECFORGE_SNAPSHOT: a local clone or bare git dir of sgl-project/SpecForge holding $SPECFORGE_COMMIT" >&2
  exit 2
fi
SNAPSHOT_GIT=$(git -C "$SNAPSHOT" rev-parse --absolute-git-dir 2>/dev/null || echo "$SNAPSHOT")
if ! git --git-dir="$SNAPSHOT_GIT" cat-file -e "$SPECFORGE_COMMIT:scripts/prepare_hidden_states.py" 2>/dev/null; then
  echo "$SNAPSHOT has no commit $SPECFORGE_COMMIT with scripts/prepare_hidden_states.py" >&2
  exit 2
fi
[ -z "$WHEELS" ] || WHEELS=$(cd "$WHEELS" && pwd)
cd "$(dirname "$0")/../.."
OUT=.kit/sf
rm -rf "$OUT"; mkdir -p "$OUT/wheels" "$OUT/scripts" .whl
git --git-dir="$SNAPSHOT_GIT" show "$SPECFORGE_COMMIT:scripts/prepare_hidden_states.py" \
  >"$OUT/scripts/prepare_hidden_states.py"
if [ -n "$WHEELS" ]; then
  cp "$WHEELS"/specforge-0.2.0-*.whl "$WHEELS"/yunchang-0.6.4-*.whl "$OUT/wheels/"
  cp "$WHEELS"/ansible_core-2.21.5-*.whl "$WHEELS"/resolvelib-1.2.0-*.whl .whl/
else
  python3 -m pip download -q --no-deps -d "$OUT/wheels" specforge==0.2.0 yunchang==0.6.4
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl ansible-core==2.21.5 resolvelib==1.2.0
fi
(cd "$OUT/wheels" && sha256sum ./*.whl >../SHA256SUMS)
du -sh "$OUT" .whl
