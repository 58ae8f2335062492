#!/usr/bin/env bash
# gpu_check and process_reclaim on a machine with two or more GPUs: each proof runs
# with the holder on GPU 1 only (GPU 0 stays idle), then on every GPU.
#   bash lab/gpu/two_gpu_proofs.sh     (from the repository root, on the GPU machine)
# Exit code 0 only if all four proofs passed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
failed=0
for gpus in 1 all; do
  for proof in gpu_check reclaim_gpu; do
    echo "######## ${proof}_proof.sh, holder on GPUs: $gpus"
    HOLDER_GPUS=$gpus GPU_PROOF_WORK=/tmp/$proof-$gpus bash "lab/gpu/${proof}_proof.sh" || failed=$((failed + 1))
  done
done
echo "TWO-GPU PROOFS: $((4 - failed))/4 passed"
[ "$failed" = 0 ]
