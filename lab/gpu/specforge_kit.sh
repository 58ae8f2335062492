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
# Usage: bash lab/gpu/specforge_kit.sh [SPECFORGE_GIT_DIR]
#   SPECFORGE_GIT_DIR: a clone of github.com/sgl-project/SpecForge (default: cloned here)
# Nothing of SpecForge is committed to this repository: .kit/ and .whl/ are git-ignored.
set -euo pipefail
cd "$(dirname "$0")/../.."
SPECFORGE_COMMIT=a6b6b0230009d15ec2a97a57384e6f53f0f96946
OUT=.kit/sf
rm -rf "$OUT"; mkdir -p "$OUT/wheels" "$OUT/scripts"
GIT_DIR=${1:-}
if [ -z "$GIT_DIR" ]; then
  GIT_DIR=$(mktemp -d)/SpecForge
  git clone -q --filter=blob:none https://github.com/sgl-project/SpecForge "$GIT_DIR"
fi
git --git-dir="$(git -C "$GIT_DIR" rev-parse --absolute-git-dir 2>/dev/null || echo "$GIT_DIR")" \
  show "$SPECFORGE_COMMIT:scripts/prepare_hidden_states.py" >"$OUT/scripts/prepare_hidden_states.py"
python3 -m pip download -q --no-deps -d "$OUT/wheels" specforge==0.2.0 yunchang==0.6.4
(cd "$OUT/wheels" && sha256sum ./*.whl >../SHA256SUMS)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl ansible-core==2.21.5 resolvelib==1.2.0
du -sh "$OUT" .whl
