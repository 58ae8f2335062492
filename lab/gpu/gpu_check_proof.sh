#!/usr/bin/env bash
# Real GPU proof of eagle3.extraction.gpu_check, on the GPU machine
# (../shared/recipes/gpu-device.md): connection local, ansible-core from the carried
# wheels in .whl/, the machine's real nvidia-smi and CUDA.
#
#   1 idle     gpu_check passes (driver >= 580, NVIDIA H200, every GPU at 0 MiB, no
#              process, persistence mode on, driver == this machine's kernel module)
#   2 busy     a python3 process allocates on every GPU with torch and ignores SIGTERM:
#              gpu_check fails, naming the PID and the MiB
#   3 serving  the same busy GPUs with gpu_check_require_idle: false (what extract.yml
#              passes while its own server runs): gpu_check passes, nothing is killed
#   4 reclaim  gpu_check_reclaim: true kills that process (SIGTERM ignored -> SIGKILL)
#              and gpu_check passes; nvidia-smi then shows 0 MiB on every GPU
#
# Usage (from the repository root, on the GPU machine):  bash lab/gpu/gpu_check_proof.sh
# Exit code 0 only if all four cases came out as above.
# Rehearsal without a GPU: GPU_PROOF_HOLDER='python3 lab/standins/nvidia_smi/nvidia-smi-standin
#   hold --gpu all --mib 20000 --ignore-sigterm' GPU_PROOF_NVIDIA_SMI=<stand-in> GPU_PROOF_HYPERVISOR=''
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
WORK=${GPU_PROOF_WORK:-/tmp/gpu_check_proof}
HOLDER_MIB=${GPU_PROOF_HOLDER_MIB:-20000}
NVIDIA_SMI=${GPU_PROOF_NVIDIA_SMI:-nvidia-smi}
HYPERVISOR=${GPU_PROOF_HYPERVISOR-localhost}
# shellcheck source=lab/gpu/lib.sh
. lab/gpu/lib.sh

run_case() {  # case reclaim [require_idle] -> writes $WORK/<case>.json and .log
  local case=$1 reclaim=$2 require_idle=${3:-true} t0=$SECONDS
  ansible-playbook -i localhost, lab/gpu/gpu_check_proof.yml \
    -e "proof_case=$case proof_reclaim=$reclaim proof_require_idle=$require_idle proof_result=$WORK/$case.json" \
    -e "proof_hypervisor=$HYPERVISOR proof_gpu_count=$GPU_COUNT" \
    -e "proof_nvidia_smi_path=$([ "$NVIDIA_SMI" = nvidia-smi ] || echo "$NVIDIA_SMI")" \
    >"$WORK/$case.log" 2>&1
  echo "$case: ansible-playbook rc $? in $((SECONDS - t0)) s" >>"$WORK/timing.txt"
  [ -f "$WORK/$case.json" ] || { echo "no result for $case; log:"; tail -40 "$WORK/$case.log"; return 1; }
}

echo "== gpu_check real GPU proof ($(date -u +%FT%TZ), $(hostname)) =="
echo "[machine] $("$NVIDIA_SMI" --query-gpu=index,name,driver_version,memory.used,persistence_mode --format=csv,noheader | tr '\n' ';')"
echo "[machine] kernel module: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
echo "[machine] $(ansible-playbook --version | head -1), python $(python3 -c 'import platform; print(platform.python_version())')"
GPU_COUNT=$("$NVIDIA_SMI" -L | grep -c '^GPU ')
passed=0

# ---- 1 idle
run_case idle false
if [ "$(field "$WORK/idle.json" "r['passed']")" = True ]; then
  passed=$((passed + 1))
  echo "[1 idle]    PASS  gpu_check passed: $(field "$WORK/idle.json" \
    "'driver %s (CUDA %s), kernel module %s, interconnect %s, GPUs: %s' % (r['driver_version'], r['cuda_version'],
     (r['kernel_module'] or {}).get('version'), r['interconnect'],
     ', '.join('%d %s %d MiB persistence %s' % (g['index'], g['name'], g['memory_used_mib'], g['persistence_mode'])
               for g in r['gpus']))")"
else
  echo "[1 idle]    FAIL  gpu_check failed on idle GPUs: $(field "$WORK/idle.json" "' | '.join(r['messages'])")"
fi

# ---- 2 busy: a holder on every GPU that ignores SIGTERM
start_holder || { echo "[2 busy]    FAIL  the holder did not start:"; exit 1; }
echo "[holder]    GPUs $HOLDER_GPUS, PID $HOLDER_PID ($(tr '\0' ' ' <"/proc/$HOLDER_PID/cmdline" | cut -c1-40)...), SigIgn $(awk '/SigIgn/ {print $2}' "/proc/$HOLDER_PID/status"); nvidia-smi: $(gpu_memory)"

run_case busy false
message=$(field "$WORK/busy.json" "' | '.join(r.get('messages', []))")
if [ "$(field "$WORK/busy.json" "r['passed']")" = False ] && [[ $message == *"PID $HOLDER_PID (python3, "*" MiB)"* ]] \
   && [[ $message == *"MiB in use; gpu_check_memory_used_max_mib is 0"* ]]; then
  passed=$((passed + 1))
  echo "[2 busy]    PASS  gpu_check failed as it must, in task '$(field "$WORK/busy.json" "r['failed_task']")':"
else
  echo "[2 busy]    FAIL  expected a failure naming PID $HOLDER_PID and its MiB; got passed=$(field "$WORK/busy.json" "r['passed']"):"
fi
field "$WORK/busy.json" "'\n'.join('              ' + m for m in r.get('messages', []))"

# ---- 3 serving: busy on purpose
run_case serving false false
if [ "$(field "$WORK/serving.json" "r['passed']")" = True ] && kill -0 "$HOLDER_PID" 2>/dev/null; then
  passed=$((passed + 1))
  echo "[3 serving] PASS  gpu_check_require_idle: false passed with the GPUs busy, PID $HOLDER_PID alive: $(gpu_memory)"
else
  echo "[3 serving] FAIL  passed=$(field "$WORK/serving.json" "r['passed']"), holder alive: $(kill -0 "$HOLDER_PID" 2>/dev/null && echo yes || echo no); $(field "$WORK/serving.json" "' | '.join(r.get('messages', []))")"
fi

# ---- 4 reclaim
run_case reclaim true
after=$(gpu_memory)
if [ "$(field "$WORK/reclaim.json" "r['passed']")" = True ] && ! kill -0 "$HOLDER_PID" 2>/dev/null \
   && [ -z "$(echo "$after" | tr ';' '\n' | awk -F', ' 'NF == 2 && $2 != 0')" ]; then
  passed=$((passed + 1))
  echo "[4 reclaim] PASS  gpu_check_reclaim killed PID $HOLDER_PID and gpu_check passed: $(field "$WORK/reclaim.json" \
    "'signals %s, GPU memory %s, reclaim took %ss' % (
       ', '.join('%s %s' % (k['signal'], k['pid']) for k in r['reclaim']['killed']),
       ' -> '.join(str(p['used_mib']) for p in r['reclaim'].get('gpu_memory_progress', [])),
       r['reclaim']['elapsed'])")"
else
  echo "[4 reclaim] FAIL  passed=$(field "$WORK/reclaim.json" "r['passed']"), holder alive: $(kill -0 "$HOLDER_PID" 2>/dev/null && echo yes || echo no); $(field "$WORK/reclaim.json" "' | '.join(r.get('messages', []))")"
fi
echo "[after]     nvidia-smi index, memory.used: $after"
sed 's/^/[timing]    /' "$WORK/timing.txt"
echo "RESULT: $passed/4 cases as expected"
[ "$passed" = 4 ]
