#!/usr/bin/env bash
# `check && pass "..." || fail "..."` is this script's idiom: pass only echoes, so fail runs only when check failed
# shellcheck disable=SC2015
# The hidden-state capture inside real SGLang 0.5.14, on the GPU machine.
#
#   proof  the sglang_patch role patches the kit's sglang (and a second run changes
#          nothing); a DeepSeek-V3-shaped model with random weights (--load-format
#          dummy) is served with the capture on, and lab/gpu/capture_client.py
#          checks: short prompts, prompts chunked over several passes, 16 at once,
#          health checks, a rid-less request, a hex-looking rid, a long request
#          aborted and sent again, then SIGTERM to the server's process group while
#          requests are in flight (every 200 has its file); a restart removes *.tmp
#          of the dead process and keeps every dump; a second server without the
#          capture returns hidden states equal to the dumps; then a Kimi-K2.5-shaped
#          config (KimiK25ForConditionalGeneration) is tried.
#   bench  prompt tokens/s with the capture off and on, same run: hidden 7168,
#          8 layers, 32 experts, 128 prompts of 2,048 tokens, 32 at a time, 3 rounds
#          a start (round 0 right after the start, rounds 1-2 steady); a warm-up start,
#          then three starts a side, alternating (CAPTURE_BENCH_TAGS); the summary
#          (lab/gpu/bench_summary.py) sets round 0 on against round 0 off, every start
#          shown; every server's log comes back in bench-servers.tar.gz. A start takes
#          65 to 90 s: spread the starts over two calls with CAPTURE_BENCH_TAGS and the
#          same CAPTURE_BENCH_RESULTS file (docs/benchmarks.md). TP=2 runs it with
#          --tp-size 2 over two GPUs. A "flags" start is an "on" start with the
#          server flags the roles add (--enable-return-hidden-states, --enable-metrics):
#          CAPTURE_BENCH_TAGS="warm on flags on flags" measures what they cost.
#   profile  where the steady cost goes (capture_profile.py): rounds and torch
#          profiles of a server without the capture and of one with it, whose parts
#          are switched off round by round (capture_variants/sitecustomize.py)
#   jobbench  the extraction job driving a capture-on server (wide model, as bench)
#          against a bare client sending the same prompts (lab/gpu/job_bench.py),
#          JOBBENCH_PROMPTS of them (default 128), with the host's CPUs sampled from
#          /proc in each phase (lab/gpu/host_profile.py); JOBBENCH_VARIANTS=plain,nice
#          runs the job a second time with its drain threads at nice +10.
#   tp2    (two GPUs) the same prompts to a TP-1 server on GPU 0, then to TP-2 servers
#          on GPUs 0,1, once without NCCL variables and once with the six of the
#          manual setup: one file per request, written by the TP-0 scheduler only,
#          input_ids equal to what was sent, hidden states equal to TP 1's within
#          bf16 all-reduce tolerance (max abs diff reported).
#
# bench, profile and jobbench serve the wide model with CAPTURE_LAYERS layers (default 8;
# 32 is the issue's second size).
#
# Needs the offline SGLang kit of ../shared/recipes/real-sglang (parts p01.. already
# copied into /tmp/kit by earlier calls, p00 carried in .kit/p00) and ansible-core's
# wheels in .whl/ (../shared/recipes/gpu-device.md). From the repository root:
#     bash lab/gpu/capture_real_sglang.sh proof|bench
# Prints PASS/FAIL lines; exit code 0 only if every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
MODE=${1:-proof}
WORK=${CAPTURE_PROOF_WORK:-/tmp/capture_proof}
KIT=${KIT:-/tmp/kit}
NVIDIA_SMI=nvidia-smi
mkdir -p "$KIT"
# shellcheck source=lab/gpu/lib.sh
. lab/gpu/lib.sh   # ansible-core from .whl, the checkout as eagle3.extraction; makes $WORK
FAILS=0
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
pass() { echo "PASS $*"; }

# shellcheck source=lab/gpu/real_sglang.sh
. lab/gpu/real_sglang.sh   # the kit, patch_with_role, start_server, stop_server
CLIENT=(python3 lab/gpu/capture_client.py)
echo "== capture in real SGLang: $MODE ($(date -u +%FT%TZ)) =="
echo "[machine] $("$NVIDIA_SMI" --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tr '\n' ';')"
echo "[sglang] $(env PYTHONPATH="$SGL_PYTHONPATH" "$SGL_PY" -c 'import importlib.metadata as m; print(m.version("sglang"), "torch", m.version("torch"))' 2>&1 | tail -1)"

if [ "$MODE" != bench ]; then
  patch_with_role 1 && pass "sglang_patch role patched the kit's deepseek_v2.py" \
    || fail "sglang_patch role (see above)"
  patch_with_role 2 && grep -qE 'changed=0 ' "$WORK/patch-2.log" \
    && pass "sglang_patch role, second run: changed=0" || fail "sglang_patch role is not idempotent"
else
  patch_with_role 1 >/dev/null || { fail "sglang_patch role"; tail -25 "$WORK/patch-1.log"; }
fi

trap 'stop_server; cleanup' EXIT

client() { "${CLIENT[@]}" "$@" | tee -a "$WORK/client.log" | grep -v '^SUMMARY'; return "${PIPESTATUS[0]}"; }

if [ "$MODE" = proof ]; then
  DUMP=/dev/shm/hs-proof
  rm -rf "$DUMP" "$DUMP".*; mkdir -p "$DUMP"
  python3 lab/gpu/model_config.py "$WORK/tiny" --hidden 2048 --layers 4 --experts 16 --context 16384
  echo "-- A: capture on (SGLANG_HS_LAYER_IDS=1,2: layers 2 and 3), chunked prefill 1024"
  if start_server A 30000 "$DUMP" "$WORK/tiny" 1,2 --chunked-prefill-size 1024 \
      --enable-return-hidden-states; then
    client scenarios --url http://127.0.0.1:30000 --dump "$DUMP" --hidden 2048 --aux 2 || FAILS=$((FAILS + 1))
    echo "-- SIGTERM while requests are in flight"
    client inflight --url http://127.0.0.1:30000 --dump "$DUMP" --hidden 2048 --aux 2 \
      --pgid "$SERVER_PGID" || FAILS=$((FAILS + 1))
    SERVER_PGID=
    grep -E 'hidden-state capture: SIGTERM' "$WORK/A.log" | tail -2 | sed 's/^/[A.log] /'
  else
    fail "server A (capture on) did not start"
  fi

  echo "-- A again on the same dump dir: *.tmp of the dead process removed, every dump kept"
  echo half >"$DUMP/stale-1.pt.4000001.0badf00d.tmp"   # a pid above pid_max: dead
  before=$(find "$DUMP" -maxdepth 1 -name '*.pt' | wc -l)
  if start_server A2 30000 "$DUMP" "$WORK/tiny" 1,2 --chunked-prefill-size 1024 \
      --enable-return-hidden-states; then
    after=$(find "$DUMP" -maxdepth 1 -name '*.pt' | wc -l)
    [ ! -e "$DUMP/stale-1.pt.4000001.0badf00d.tmp" ] && pass "the dead process's *.tmp was removed at start" \
      || fail "a dead process's *.tmp is still there"
    [ "$before" = "$after" ] && pass "every dump kept across the restart ($after files)" \
      || fail "dumps before $before, after $after"
    grep -m1 'removed .* \*.tmp files' "$WORK/A2.log" | sed 's/^.*hidden-state capture/[A2.log] hidden-state capture/'
    t0=$SECONDS; stop_server
    echo "[A2] stopped by SIGTERM in $((SECONDS - t0)) s"
  else
    fail "server A (restart) did not start"
  fi

  echo "-- B: no capture, --enable-return-hidden-states (same model, same seed)"
  if start_server B 30001 - "$WORK/tiny" - --chunked-prefill-size 1024 --enable-return-hidden-states; then
    client compare --url http://127.0.0.1:30001 --dump "$DUMP" --sent "$DUMP/../sent.json" \
      --rids short-0,short-7,conc-5,chunk-0,chunk-1,abort-1 || FAILS=$((FAILS + 1))
    stop_server
  else
    fail "server B did not start"
  fi

  echo "-- Kimi-K2.5-shaped config (KimiK25ForConditionalGeneration around the same text model)"
  python3 lab/gpu/model_config.py "$WORK/kimi" --hidden 2048 --layers 4 --experts 16 --kimi-k25
  rm -rf /dev/shm/hs-kimi
  if start_server K 30002 /dev/shm/hs-kimi "$WORK/kimi" 1,2 --chunked-prefill-size 1024; then
    client scenarios --url http://127.0.0.1:30002 --dump /dev/shm/hs-kimi --hidden 2048 --aux 2 \
      || FAILS=$((FAILS + 1))
    stop_server
  else
    echo "INFO Kimi-K2.5-shaped config not served (reason above): not counted as a failure"
  fi
elif [ "$MODE" = tp2 ]; then
  # NCCL variables the machine may already set are removed, so "none" means none
  NO_NCCL=(); for v in $(env | grep -o '^NCCL_[A-Z_]*'); do NO_NCCL+=(-u "$v"); done
  MANUAL_NCCL=(NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS NCCL_MAX_NCHANNELS=16
               NCCL_BUFFSIZE=16777216 NCCL_NTHREADS=512)
  python3 lab/gpu/model_config.py "$WORK/tiny" --hidden 2048 --layers 4 --experts 16 --context 16384
  for run in tp1 tp2 tp2-nccl; do
    dump=/dev/shm/hs-$run; rm -rf "$dump"; mkdir -p "$dump"
    case $run in
      tp1) TP=1; SERVER_UNSET=("${NO_NCCL[@]}"); SERVER_ENV=(CUDA_VISIBLE_DEVICES=0) ;;
      tp2) TP=2; SERVER_UNSET=("${NO_NCCL[@]}"); SERVER_ENV=("CUDA_VISIBLE_DEVICES=0,1") ;;
      tp2-nccl) TP=2; SERVER_UNSET=("${NO_NCCL[@]}")
                SERVER_ENV=("CUDA_VISIBLE_DEVICES=0,1" "${MANUAL_NCCL[@]}" NCCL_DEBUG=INFO) ;;
    esac
    echo "-- $run: --tp-size $TP, environment: ${SERVER_ENV[*]}"
    if start_server "$run" 30000 "$dump" "$WORK/tiny" 1,2 --chunked-prefill-size 1024; then
      client send --url http://127.0.0.1:30000 --dump "$dump" --hidden 2048 --aux 2 --tp "$TP" \
        || FAILS=$((FAILS + 1))
      grep -hoE 'hidden-state capture: TP rank [0-9]+ does not write.*' "$WORK/$run.log" | sort -u | sed "s/^/[$run.log] /"
      for pid in $(ps -eo pid=,args= | awk '$2 ~ /^sglang::scheduler/ {print $1}'); do
        got=$(tr '\0' '\n' <"/proc/$pid/environ" | grep -E '^NCCL_' | grep -vE '^NCCL_(CUMEM|NVLS)_ENABLE=' | sort | tr '\n' ' ')
        echo "[$run] $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-30) pid $pid: NCCL environment: ${got:-none}"
        want=$(if [ "$run" = tp2-nccl ]; then printf '%s\n' "${MANUAL_NCCL[@]}" NCCL_DEBUG=INFO | sort | tr '\n' ' '; fi)
        [ "$got" = "$want" ] && pass "$run: pid $pid runs with exactly the intended NCCL variables" \
          || fail "$run: pid $pid NCCL environment '$got', wanted '$want'"
      done
      [ "$run" = tp2-nccl ] && grep -hoE 'NCCL_[A-Z_]+ set by environment to [^ ]+' "$WORK/$run.log" \
        | sort -u | sed "s/^/[$run.log] /"
      stop_server
      [ "$run" = tp1 ] || client tpdiff --url - --ref /dev/shm/hs-tp1 --dump "$dump" --label "$run vs tp1" \
        --hidden 2048 --aux 2 || FAILS=$((FAILS + 1))
    else
      fail "server $run did not start"
    fi
  done
  client tpdiff --url - --ref /dev/shm/hs-tp2 --dump /dev/shm/hs-tp2-nccl --label "tp2-nccl vs tp2" \
    --hidden 2048 --aux 2 || FAILS=$((FAILS + 1))
elif [ "$MODE" = jobbench ]; then
  DUMP=/dev/shm/hs-jobbench OUTDIR=${JOBBENCH_OUT:-/tmp/jobbench-out}
  rm -rf "$DUMP" "$OUTDIR"; mkdir -p "$DUMP" "$OUTDIR"
  python3 lab/gpu/model_config.py "$WORK/wide" --hidden 7168 --layers "${CAPTURE_LAYERS:-8}" --experts 32 --context 4096
  echo "[disks] $(df -h /dev/shm | tail -1); $(df -h "$OUTDIR" | tail -1)"
  if start_server jobbench 30010 "$DUMP" "$WORK/wide" 1,3,5; then
    env PYTHONPATH="$SGL_PYTHONPATH" "$SGL_PY" lab/gpu/job_bench.py --url http://127.0.0.1:30010 \
      --dump "$DUMP" --out "$OUTDIR" --work "$WORK/jobbench" --python "$SGL_PY" \
      --prompts "${JOBBENCH_PROMPTS:-128}" --job-variants "${JOBBENCH_VARIANTS:-plain}" 2>&1 \
      | tee -a "$WORK/client.log" || FAILS=$((FAILS + 1))
    cat "$WORK"/jobbench/job-*.log >"$WORK/jobbench.log" 2>/dev/null
    tail -5 "$WORK/jobbench.log" | sed 's/^/[job.log] /'
    stop_server
  else
    fail "jobbench server did not start"
  fi
  rm -rf "$OUTDIR"
elif [ "$MODE" = profile ]; then
  # Where the steady cost goes: a server without the capture, then one with it whose
  # parts are switched off round by round (lab/gpu/capture_variants), each with a
  # torch profile (lab/gpu/capture_profile.py). PROFILE_SERVERS picks "off", "on"
  # or both (two calls of at most 10 minutes each); PROFILE_VARIANTS the variants.
  DUMP=/dev/shm/hs-profile PROFILES=/tmp/capture-profiles
  rm -rf "$DUMP"; mkdir -p "$DUMP" "$PROFILES"
  python3 lab/gpu/model_config.py "$WORK/wide" --hidden 7168 --layers "${CAPTURE_LAYERS:-8}" --experts 32 --context 4096
  for tag in ${PROFILE_SERVERS:-off on}; do
    dump=-; SERVER_ENV=()
    if [ "$tag" = on ]; then
      dump=$DUMP
      SERVER_ENV=(PYTHONPATH="$PWD/lab/gpu/capture_variants${SGL_PYTHONPATH:+:$SGL_PYTHONPATH}"
                  CAPTURE_VARIANT_FILE=/tmp/capture_variant)
    fi
    if start_server "profile-$tag" 30010 "$dump" "$WORK/wide" 1,3,5; then
      if [ "$tag" = on ]; then
        grep -m1 'capture_variants:' "$WORK/profile-$tag.log" || fail "capture_variants not loaded"
        client_args=(--dump "$DUMP" --variant-file /tmp/capture_variant
                     --variants "${PROFILE_VARIANTS:-skip,full,copy,gpu}"
                     --profile-variants "${PROFILE_PROFILED:-skip,full,copy}"
                     --check "${PROFILE_CHECK:-full}")
      else
        client_args=(--variants off --profile-variants "${PROFILE_OFF_PROFILED:-off}")
      fi
      env PYTHONPATH= python3 lab/gpu/capture_profile.py --url http://127.0.0.1:30010 \
        --profile-dir "$PROFILES" "${client_args[@]}" 2>&1 | tee -a "$WORK/client.log" \
        || FAILS=$((FAILS + 1))
      grep -h 'forward_wait_s\|"dumped"' "$DUMP/CAPTURE_STATS.json" 2>/dev/null | tr -d ' \n'; echo
      stop_server
    else
      fail "profile server ($tag) did not start"
    fi
  done
  SERVER_ENV=()
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT/traces"
    find "$PROFILES" -name '*.trace.json.gz' -size -15M -exec cp {} "$OUT/traces/" \;
  fi
else
  # the first round after each start, capture off against on: CAPTURE_BENCH_TAGS starts
  # in turn (default: a warm-up start that compiles sglang's kernels, not counted, then
  # off and on three times each, alternating), every server's log kept
  DUMP=/dev/shm/hs-bench
  rm -rf "$DUMP"; mkdir -p "$DUMP"
  python3 lab/gpu/model_config.py "$WORK/wide" --hidden 7168 --layers "${CAPTURE_LAYERS:-8}" --experts 32 --context 4096
  echo "[shm] $(df -h /dev/shm | tail -1)"
  # each start's rates go to CAPTURE_BENCH_RESULTS too: name the same file outside $WORK
  # in two calls to spread the starts over them (a start takes 65 to 90 s)
  RESULTS=${CAPTURE_BENCH_RESULTS:-$WORK/bench-results.jsonl}
  n=$(grep -c '^{"bench"' "$RESULTS" 2>/dev/null)
  for tag in ${CAPTURE_BENCH_TAGS:-warm off on off on off on}; do
    n=$((n + 1))
    dump=-; [ "$tag" = off ] || dump=$DUMP
    dump_args=(); [ "$tag" = off ] || dump_args=(--dump "$DUMP")
    rounds=3; [ "$tag" = warm ] && rounds=1
    # "flags": the capture on and the two server flags the roles add by default, the capture
    # check's and Prometheus's (their cost: CAPTURE_BENCH_TAGS="warm on flags on flags ...")
    flags=(); [ "$tag" = flags ] && flags=(--enable-return-hidden-states --enable-metrics)
    if start_server "bench-$n-$tag" 30010 "$dump" "$WORK/wide" 1,3,5 "${flags[@]}"; then
      client bench --url http://127.0.0.1:30010 --tag "$tag-$n" --rounds "$rounds" "${dump_args[@]}" \
        || FAILS=$((FAILS + 1))
      grep "^{\"bench\": \"$tag-$n\"" "$WORK/client.log" | tail -1 >>"$RESULTS"
      stop_server
    else
      fail "bench server $n ($tag) did not start"
    fi
  done
  python3 lab/gpu/bench_summary.py "$RESULTS" || FAILS=$((FAILS + 1))
  [ -n "${OUT:-}" ] && (cd "$WORK" && tar -czf "$OUT/bench-servers.tar.gz" bench-*.log)
fi
# what comes back: the servers' logs, the client's, the role's, the job's (those the mode made)
for f in A.log K.log bench-on.log profile-on.log client.log patch-1.log tp2.log tp2-nccl.log jobbench.log; do
  [ -f "$WORK/$f" ] && cp "$WORK/$f" "${OUT:-$WORK}/"
done
echo "== $MODE: $FAILS failure(s) =="
[ "$FAILS" = 0 ]
