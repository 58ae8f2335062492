#!/usr/bin/env bash
# What the online mode needs on the GPU machine beyond the SGLang kit and .kit/sf
# (lab/gpu/online_real_engine.sh): .kit/mc/wheels, Mooncake's CUDA-less build for the machine's
# Python 3.12 (its master, segment holder and client, over TCP: the store runs in host memory) and
# msgpack, which it imports and the kit lacks. One part of about 45 MiB: one call carries it.
# Nothing of Mooncake is committed to this repository: .kit/ is git-ignored.
# Usage: bash lab/gpu/online_kit.sh [WHEEL_DIR]   (WHEEL_DIR: the wheels already downloaded)
set -euo pipefail
WHEELS=${1:-}
[ -z "$WHEELS" ] || WHEELS=$(cd "$WHEELS" && pwd)
cd "$(dirname "$0")/../.."
OUT=.kit/mc
rm -rf "$OUT"; mkdir -p "$OUT/wheels"
if [ -n "$WHEELS" ]; then
  cp "$WHEELS"/mooncake_transfer_engine_non_cuda-0.3.13.post1-*.whl "$WHEELS"/msgpack-*.whl "$OUT/wheels/"
else
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$OUT/wheels" mooncake-transfer-engine-non-cuda==0.3.13.post1 msgpack==1.1.2
fi
(cd "$OUT/wheels" && sha256sum ./*.whl >../SHA256SUMS)
du -sh "$OUT"
