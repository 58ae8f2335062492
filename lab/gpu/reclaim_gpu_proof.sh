#!/usr/bin/env bash
# Real GPU proof of eagle3.extraction.process_reclaim, on the GPU machine
# (../shared/recipes/gpu-device.md): connection local, ansible-core from the carried
# wheels in .whl/, the machine's real nvidia-smi and CUDA.
#
# A python3 process started with setsid allocates GPU memory with torch on every GPU
# and ignores SIGTERM. Then process_reclaim with gpu_holders: true, match: [] and
# gpu_memory_max_mib: 0 runs three times:
#   1 check mode  reports exactly that process in would_kill and kills nothing
#                 (if anything else on the machine would be killed, the script stops here)
#   2 reclaim     SIGTERM (ignored), SIGKILL, and every GPU back at 0 MiB
#   3 again       changed: false, nothing matched
#
# Usage (from the repository root, on the GPU machine):  bash lab/gpu/reclaim_gpu_proof.sh
# Exit code 0 only if all three came out as above.
# Rehearsal without a GPU (stand-in nvidia-smi; its holder opens no real device):
#   GPU_PROOF_NVIDIA_SMI=$PWD/lab/standins/nvidia_smi/nvidia-smi \
#   GPU_PROOF_HOLDER='python3 lab/standins/nvidia_smi/nvidia-smi-standin hold --gpu all --mib 20000 --ignore-sigterm' \
#   bash lab/gpu/reclaim_gpu_proof.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
WORK=${GPU_PROOF_WORK:-/tmp/reclaim_gpu_proof}
HOLDER_MIB=${GPU_PROOF_HOLDER_MIB:-20000}
NVIDIA_SMI=${GPU_PROOF_NVIDIA_SMI:-nvidia-smi}
# shellcheck source=lab/gpu/lib.sh
. lab/gpu/lib.sh

run_case() {  # case check(true|false) -> $WORK/<case>.json
  local case=$1 check=$2 t0=$SECONDS
  ansible-playbook -i localhost, lab/gpu/reclaim_gpu_proof.yml \
    -e "proof_result=$WORK/$case.json proof_check=$check" \
    -e "proof_nvidia_smi_path=$([ "$NVIDIA_SMI" = nvidia-smi ] || echo "$NVIDIA_SMI")" \
    >"$WORK/$case.log" 2>&1
  echo "$case: ansible-playbook rc $? in $((SECONDS - t0)) s" >>"$WORK/timing.txt"
  [ -f "$WORK/$case.json" ] || { echo "no result for $case; log:"; tail -40 "$WORK/$case.log"; return 1; }
}

echo "== process_reclaim real GPU proof ($(date -u +%FT%TZ), $(hostname)) =="
echo "[machine]   $("$NVIDIA_SMI" --query-gpu=index,name,driver_version,memory.used --format=csv,noheader | tr '\n' ';')"
echo "[machine]   $(ansible-playbook --version 2>/dev/null | sed -n 1p), python $(python3 -c 'import platform; print(platform.python_version())')"
passed=0

# the holder: every GPU, SIGTERM ignored, its own session
start_holder || { echo "FAIL  the holder did not start:"; exit 1; }
devices=0
for fd in /proc/"$HOLDER_PID"/fd/*; do [[ $(readlink "$fd") == /dev/nvidia* ]] && devices=$((devices + 1)); done
echo "[holder]    GPUs $HOLDER_GPUS, PID $HOLDER_PID, SigIgn $(awk '/SigIgn/ {print $2}' /proc/"$HOLDER_PID"/status), nvidia devices open: $devices; nvidia-smi: $(gpu_memory)"

# ---- 1 check mode
run_case check true || exit 1
would_kill=$(field "$WORK/check.json" "r.get('would_kill')")
if [ "$would_kill" = "[$HOLDER_PID]" ] && [ "$(field "$WORK/check.json" "r['killed']")" = "[]" ] \
   && kill -0 "$HOLDER_PID" 2>/dev/null; then
  passed=$((passed + 1))
  echo "[1 check]   PASS  would_kill $would_kill, matched by $(field "$WORK/check.json" "r['matched'][0]['matched_by']"), nothing killed; GPU memory $(field "$WORK/check.json" "[g['memory_used_mib'] for g in r['gpu_memory_before']]") MiB"
else
  echo "[1 check]   FAIL  would_kill $would_kill (expected [$HOLDER_PID]); protected: $(field "$WORK/check.json" "[(p['pid'], p['cmdline'][:40], p['reason']) for p in r.get('protected', [])]")"
  echo "            not running the real reclaim: it would touch more than the holder"
  exit 1
fi

# ---- 2 reclaim
run_case reclaim false
after=$(gpu_memory)
if [ "$(field "$WORK/reclaim.json" "r.get('failed', False)")" = False ] && ! kill -0 "$HOLDER_PID" 2>/dev/null \
   && [ -z "$(echo "$after" | tr ';' '\n' | awk -F', ' 'NF == 2 && $2 != 0')" ]; then
  passed=$((passed + 1))
  echo "[2 reclaim] PASS  $(field "$WORK/reclaim.json" \
    "'signals: %s; GPU memory before %s MiB, after %s MiB; progress %s; elapsed %ss' % (
       ', '.join('%s %s' % (k['signal'], k['pid']) for k in r['killed']),
       [g['memory_used_mib'] for g in r['gpu_memory_before']], [g['memory_used_mib'] for g in r['gpu_memory_after']],
       ' -> '.join('%s@%ss' % (p['used_mib'], p['elapsed']) for p in r['gpu_memory_progress']), r['elapsed'])")"
else
  echo "[2 reclaim] FAIL  $(field "$WORK/reclaim.json" "r.get('msg')"); holder alive: $(kill -0 "$HOLDER_PID" 2>/dev/null && echo yes || echo no); nvidia-smi: $after"
fi

# ---- 3 again
run_case again false
if [ "$(field "$WORK/again.json" "r['changed']")" = False ] && [ "$(field "$WORK/again.json" "r['matched']")" = "[]" ]; then
  passed=$((passed + 1))
  echo "[3 again]   PASS  changed: false, nothing matched; GPU memory $(field "$WORK/again.json" "[g['memory_used_mib'] for g in r['gpu_memory_after']]") MiB"
else
  echo "[3 again]   FAIL  changed=$(field "$WORK/again.json" "r['changed']") matched=$(field "$WORK/again.json" "r.get('matched')")"
fi
echo "[after]     nvidia-smi index, memory.used: $after"
sed 's/^/[timing]    /' "$WORK/timing.txt"
echo "RESULT: $passed/3 cases as expected"
[ "$passed" = 3 ]
