#!/usr/bin/env bash
# `check && pass "..." || fail "..."` is this script's idiom: pass only echoes, so fail runs only when check failed
# shellcheck disable=SC2015
# Training while extracting on the real engine (issue 37): real SGLang 0.5.14 with the capture on (the
# sglang_patch role), a real Mooncake store, the collection's capture gateway, SpecForge 0.2.0's own producer
# and trainer, on one GPU; against the files mode (the extraction job, then SpecForge's offline trainer) on the
# same model, prompts, drafter config, vocabulary map and seed.
#
#   model   the SpecForge side-by-side's wide model (lab/gpu/specforge_model.py: hidden 7168, 32 layers, 32
#           experts, seeded dummy weights), aux layers 1,15,28 (SpecForge's default for 32 layers), 144
#           conversations of 24 to 2,048 tokens, no two of one length (`order` tells samples apart by it): the
#           first 128 train, the last 16 are the fixed eval set
#   extract same tensors: 8 prompts online, one a batch (lease 1, in-flight window 1), read back from Mooncake
#           by the collection's reader (SpecForge's consumer-side API), then the files mode on the same token
#           ids at one prompt a batch: tests/online/online_fleet_check.py, bit for bit. Then the files mode's
#           extraction of the 128 (job concurrency 16, timed) and of the eval set
#   train   the files mode's training: SpecForge's offline trainer, one epoch (128 steps, batch 1), a
#           checkpoint every 25 steps, each evaluated beside the training by SpecForge's own evaluator on the
#           fixed eval set and then deleted (about 12 GB each for this draft: the disk holds 64 GiB)
#   ONE_A_BATCH=1 (extract, online): every capture at one prompt a batch, the files mode's job at concurrency 1
#           and the online runs' producer at lease 1 with one prompt in flight. SGLang's prefill of a prompt
#           in a batch of others may differ in its last bits from that prompt's alone; one a batch, the two modes'
#           tensors are equal (the same-tensors check). With COMPARE_BATCHING=1 too, extract also runs the job
#           at concurrency 16 and counts the samples whose tensors differ from the ones captured alone
#           (lab/gpu/specforge_compare.py; about 70 s more)
#   online  the online mode, one run: producer and SpecForge's trainer beside the server on the one GPU, timed
#           from the producer's start to the trainer's exit, the bytes every process wrote, the GPU memory at
#           its peak; its checkpoints evaluated after it (no room for the evaluator beside server and trainer)
#   ordered the files mode's training again, fed in the order online's trainer read the samples (symlinks named
#           so that SpecForge's offline shuffle gives that order), its step and eval losses against online's
#           (ONLINE_KILL_AT=N: the fault below in this run, at trainer step N)
#   fault   a second online run with the server SIGKILLed (its process group) at trainer step $KILL_AT and
#           started again with its own command (what the unit's Restart= does; no systemd on the GPU
#           machine); its checkpoints evaluated; the eval losses of the three trainings side by side
#
# Every run reads one vocabulary map, SpecForge's own of the 128 training conversations.
# Needs the SGLang kit in /tmp/kit (parts, as lab/gpu/specforge_side_by_side.sh), .kit/sf (SpecForge's
# wheels), .kit/mc (Mooncake's CUDA-less wheel for Python 3.12 and msgpack: lab/gpu/online_kit.sh) and
# ansible-core's wheels in .whl. From the repository root, one call each (at most 10 minutes a call):
#     bash lab/gpu/online_real_engine.sh extract|train|online|ordered|fault      (or all)
# (extract: SKIP_SAME=1 leaves out the same-tensors check; EVAL_SET_ONLY=1 extracts the eval set alone)
# On a card of 120 GiB or more (an H200) the online runs' checkpoints are evaluated beside them, as the files
# mode's are; on an 80 GiB card after them.
# Prints PASS/FAIL lines and JSON result lines ($OUT/online-results.jsonl); exit 0 only if all passed.
set -uo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.." || exit 1
MODE=${1:-extract}
if [ "$MODE" = all ]; then
  rc=0
  for mode in extract train online ordered fault; do bash "$SELF" "$mode" || rc=1; done
  exit "$rc"
fi
WORK=${ONLINE_WORK:-/tmp/online_real}
KIT=${KIT:-/tmp/kit}
NVIDIA_SMI=nvidia-smi
KILL_AT=${KILL_AT:-40}
# the online runs share the GPU between server and trainer: on an 80 GiB card the server's 0.5 (41.6 GiB) and the
# trainer's 33.6 GiB left under 2 GiB; its KV cache needs little (prompts of at most 2,048 tokens, a few at a time)
case $MODE in online|fault) export SGL_MEM_FRACTION=${SGL_MEM_FRACTION:-0.4} ;; esac
if [ -n "${ONE_A_BATCH:-}" ]; then FILES_CONCURRENCY=1; ONLINE_WINDOW=(--lease 1 --high 1 --low 1)
else FILES_CONCURRENCY=16; ONLINE_WINDOW=(); fi
mkdir -p "$KIT"
FRESH_WORK=$([ "$MODE" = extract ] && echo 1)
# shellcheck source=lab/gpu/work_env.sh
. lab/gpu/work_env.sh   # ansible-core, $WORK, pass/fail, the kit
MEM_PID=
stop_all() { [ -z "$MEM_PID" ] || kill "$MEM_PID" 2>/dev/null; stop_server; cleanup; }
trap stop_all EXIT

# SpecForge's and Mooncake's wheels, each in a folder of its own on the PYTHONPATH (nothing else changes)
SF_SITE=/tmp/sfsite
MC_SITE=/tmp/mcsite
for part in sf mc; do
  [ -d "$KIT/$part" ] || { mkdir -p "$KIT/$part"; cp -r ".kit/$part/." "$KIT/$part/"; }
  site=$([ "$part" = sf ] && echo "$SF_SITE" || echo "$MC_SITE")
  if [ ! -f "$site/.complete" ]; then
    (cd "$KIT/$part/wheels" && sha256sum -c --quiet ../SHA256SUMS) || { echo "FAIL the $part wheels"; exit 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$KIT/$part"/wheels/*.whl \
      && touch "$site/.complete"
  fi
done
ENGINE_PYTHONPATH="$SF_SITE:$MC_SITE${SGL_PYTHONPATH:+:$SGL_PYTHONPATH}"
ENGINE=(env PYTHONPATH="$ENGINE_PYTHONPATH" NCCL_NVLS_ENABLE=0 "$SGL_PY" lab/gpu/online_real_engine.py)
SIDE=(env PYTHONPATH="$SGL_PYTHONPATH" "$SGL_PY" lab/gpu/side_by_side.py)
RECORD=$WORK/online-results.jsonl   # every call's results; copied into $OUT at the end
M=$WORK/wide
LAYERS=1,15,28
HIDDEN=7168
DUMP=/dev/shm/hs-online
PORT=30020
URL=http://127.0.0.1:$PORT
# this call's own output into $OUT as it comes (line-buffered: a call cut at its time limit still brings it back)
[ -z "${OUT:-}" ] || exec > >(stdbuf -oL tr "\r" "\n" | tee "$OUT/run-$MODE.log") 2>&1
echo "== training while extracting on the real engine: $MODE ($(date -u +%FT%TZ)) =="
echo "[machine] $("$NVIDIA_SMI" --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tr '\n' ';') $(nproc) cores"
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$1" "$2"; }
server_up() { rm -rf "$DUMP"; mkdir -p "$DUMP"; server_restart; }
# the server's own command again, its dump dir as it was (what the unit's Restart= does)
# --enable-return-hidden-states: the files mode's capture check asks the server for its own hidden states (the
# sglang_server role adds it while extraction_job_capture_check is on)
server_restart() { start_server ours "$PORT" "$DUMP" "$M/model" "$LAYERS" --enable-return-hidden-states; }
restart_fraction() {  # the first start's bytes (SGL_MEM_FRACTION of the card) as a fraction of the memory free now
  "$NVIDIA_SMI" --query-gpu=memory.free,memory.total --format=csv,noheader,nounits | head -1 \
    | awk -F', *' -v f="$SGL_MEM_FRACTION" '{ r = f * $2 / $1; printf "%.3f", (r > 0.95 ? 0.95 : r) }'
}
gpu_total_mib() { "$NVIDIA_SMI" --query-gpu=memory.total --format=csv,noheader,nounits | head -1; }
memory_watch() {  # the GPU's memory used, every 2 s, into $1 (the online runs: server and trainer side by side)
  ( while :; do "$NVIDIA_SMI" --query-gpu=memory.used,memory.total --format=csv,noheader,nounits >>"$1"; sleep 2; done ) &
  MEM_PID=$!
}
memory_peak() { kill "$MEM_PID" 2>/dev/null; MEM_PID=; sort -t, -k1 -n "$1" | tail -1 | awk -F', *' '{print $1 " of " $2 " MiB"}'; }
files_job() {  # name dataset out concurrency: the extraction job, timed from its start to every file durable
  local t0; t0=$(now)
  "${SIDE[@]}" job --name "$1" --model "$M/model" --dataset "$2" --out "$3" --work "$WORK/jobs" --url "$URL" \
    --dump "$DUMP" --concurrency "$4" --max-length 2048 && pass "files mode: job $1 (concurrency $4)" \
    || { fail "files mode: job $1"; tail -20 "$WORK/jobs/$1.log"; }
  # (a job refused at its start made no dir: 0 bytes, where an empty value broke the record's JSON and every
  # report of the lease after it)
  echo "{\"files_extract\": {\"name\": \"$1\", \"seconds\": $(secs "$t0" "$(now)"), \"bytes\": $(du -sb "$3" 2>/dev/null | cut -f1 | grep . || echo 0)}}" | tee -a "$RECORD"
}
run_config() {  # file features run_id output_dir [a data key] [a training key]: SpecForge's offline run config
  local data=${5:+, $5} training=${6:+, $6}
  cat >"$1" <<EOF
model: {target_model_path: $M/model, draft_model_config: $M/draft.json, vocab_mapping_path: $WORK/vocab_mapping.pt}
data: {hidden_states_path: $2, max_length: 2048, chat_template: qwen, cache_dir: $WORK/cache-$3$data}
training: {strategy: eagle3, num_epochs: 1, batch_size: 1, learning_rate: 1.0e-3, max_grad_norm: 0.5, ttt_length: 7,
           attention_backend: sdpa, log_interval: 1, save_interval: 25, seed: 0$training}
tracking: {report_to: none}
run_id: $3
output_dir: $4
deployment: {mode: local_colocated, trainer: {nnodes: 1, nproc_per_node: 1}}
EOF
}
eval_config() {  # the run config SpecForge's evaluator reads: the fixed eval set, every run's checkpoints against it
  run_config "$WORK/eval.yaml" "$WORK/files-eval" eval "$WORK/eval-out" \
    "eval_hidden_states_path: $WORK/files-eval" "eval_interval: 25"
}
EVAL_PID=
evaluate_beside() {  # label output_dir run_id: SpecForge's evaluator on each checkpoint as it comes, then deleted
  rm -f "$WORK/$1.done"
  "${ENGINE[@]}" eval --config "$WORK/eval.yaml" --record "$RECORD" --runs "$1:$2:$3" --until "$WORK/$1.done" \
    --delete >"$WORK/eval-$1.log" 2>&1 &
  EVAL_PID=$!
}
evaluated() {  # label: the training is over; the evaluator finishes its last checkpoints
  touch "$WORK/$1.done"
  wait "$EVAL_PID" && pass "SpecForge's evaluator on every checkpoint of $1" \
    || { fail "eval of $1"; grep -v -i warn "$WORK/eval-$1.log" | tail -20; }
  grep '^{"eval"' "$WORK/eval-$1.log"
}
prune_optimizer_state() {  # output_dir run_id: each complete checkpoint's optimizer state (SpecForge's rank
  # file, about 8 GB for this draft) deleted as it comes: the evaluator reads the draft's weights only, and six
  # whole checkpoints of about 12 GB each filled the GPU machine's 64 GiB disk
  while :; do
    for d in "$1/$2"-step*/; do [ -f "$d/training_state.pt" ] && rm -f "$d"/training_state_rank*.pt; done
    sleep 1
  done
}
online_trained() {  # name [kill_at]: one online run (the server SIGKILLed at trainer step kill_at and started
  # again with its own command, if given), SpecForge's evaluator on its checkpoints, then the eval losses
  # against the files mode's. On an 80 GiB card the evaluator runs after, not beside: server (41.6 GiB) and
  # trainer (33.2 GiB) leave too little for it (its 3 GiB more ran the trainer out of memory at step 54)
  local name=$1 kill_at=${2:-} prune run step=0 fraction beside=
  rm -rf "${WORK:?}/$name"
  eval_config
  server_up || { fail "the server did not start"; return 1; }
  memory_watch "$WORK/memory-$name.csv"
  prune_optimizer_state "$WORK/$name/output" "$name" &
  prune=$!
  [ "$(gpu_total_mib)" -lt 122880 ] || { beside=1; evaluate_beside "$name" "$WORK/$name/output" "$name"; }
  online_run "$name" specforge --dataset "$M/train.jsonl" --timeout 420 "${ONLINE_WINDOW[@]}" &
  run=$!
  if [ -n "$kill_at" ]; then
    while [ "$step" -lt "$kill_at" ] && kill -0 "$run" 2>/dev/null; do
      sleep 0.5
      step=$(grep -o '^step [0-9]*:' "$WORK/$name/consumer.log" 2>/dev/null | tail -1 | tr -dc 0-9)
      step=${step:-0}
    done
    echo "[fault] SIGKILL to the server's process group at trainer step $step ($(date -u +%T))"
    kill -KILL -- "-$SERVER_PGID" 2>/dev/null; SERVER_PGID=
    sleep 5   # the GPU memory of the killed processes freed
    # SGLang 0.5.14 sizes its static memory as a fraction of the memory free when it starts
    # (model_runner_kv_cache_mixin.py: KV pool = free after the weights - free before them * (1 - fraction)):
    # started again beside the trainer, which now holds about half the card, the same 0.4 left it less than
    # its weights (third lease: it never came back). On one GPU the restart asks for the same bytes as the
    # first start, as a fraction of what is free now; on the fleet the trainer has GPUs of its own.
    fraction=$(restart_fraction)
    SGL_MEM_FRACTION=$fraction server_restart \
      && pass "the server came back with its own command (--mem-fraction-static $fraction)" \
      || { fail "the server did not come back"; tail -20 "$WORK/ours.log"; }
  fi
  wait "$run" && pass "online $name: SpecForge trained one epoch while the server extracted" \
    || { fail "online: $name"; grep -v -i warn "$WORK/$name/consumer.log" | tail -30; }
  echo "[memory] GPU memory at its peak, server and trainer: $(memory_peak "$WORK/memory-$name.csv")"
  kill "$prune"
  stop_server
  if [ -n "$beside" ]; then evaluated "$name"; else
    "${ENGINE[@]}" eval --config "$WORK/eval.yaml" --record "$RECORD" --runs "$name:$WORK/$name/output:$name" \
      --delete >"$WORK/eval-$name.log" 2>&1 && pass "SpecForge's evaluator on every checkpoint of $name" \
      || { fail "eval of $name"; grep -v -i warn "$WORK/eval-$name.log" | tail -20; }
    grep '^{"eval"' "$WORK/eval-$name.log"
  fi
  "${ENGINE[@]}" report --record "$RECORD" --pairs "files,$name,0.01" online-1,online-2 \
    && pass "$name's eval losses within 0.01 of the files mode's at every eval" || fail "eval losses apart"
}
files_trained() {  # label features_dir: SpecForge's offline trainer, one epoch from the files, evaluated beside it
  local label=$1 t0
  run_config "$WORK/train-$label.yaml" "$2" "$label" "$WORK/train-$label/out"
  eval_config
  evaluate_beside "$label" "$WORK/train-$label/out" "$label"
  t0=$(now)
  env PYTHONPATH="$ENGINE_PYTHONPATH" NCCL_NVLS_ENABLE=0 timeout 420 "$SGL_PY" -m specforge.cli train \
    -c "$WORK/train-$label.yaml" >"$WORK/train-$label.log" 2>&1 \
    && pass "files mode: SpecForge trained one epoch from the files ($label)" \
    || { fail "files mode: training $label"; grep -v -i warn "$WORK/train-$label.log" | tail -25; }
  echo "{\"files_train\": {\"name\": \"$label\", \"seconds\": $(secs "$t0" "$(now)"), \"steps\": $(grep -c '^step [0-9]*:' "$WORK/train-$label.log")}}" | tee -a "$RECORD"
  evaluated "$label"
}
online_run() {  # name consumer [more args]: one online run against the running server
  local name=$1 consumer=$2
  shift 2
  "${ENGINE[@]}" online --name "$name" --work "$WORK/$name" --model "$M/model" --draft "$M/draft.json" \
    --vocab-mapping "$WORK/vocab_mapping.pt" --server-url "$URL" --dump "$DUMP" --layers "$LAYERS" \
    --hidden "$HIDDEN" --consumer "$consumer" --mooncake-bin "$MC_SITE/bin" --record "$RECORD" "$@"
}
compare_batching() {  # the training prompts at 16 at once against the files one a batch: what batching changes
  files_job trainc16 "$M/train.jsonl" "$WORK/files-train-c16" 16   # a job name has no "-"
  env PYTHONPATH="$SGL_PYTHONPATH" "$SGL_PY" lab/gpu/specforge_compare.py "$WORK/files-train" \
    "$WORK/files-train-c16" --label "one a batch vs 16 at once" | tail -12 | tee "$WORK/compare.log"
  grep '^{"compare"' "$WORK/compare.log" >>"$RECORD"
  rm -rf "$WORK/files-train-c16"
}

if [ "$MODE" = extract ]; then
  rm -f "$RECORD"
  patch_with_role 1 && pass "sglang_patch role patched the kit's deepseek_v2.py" || fail "sglang_patch role"
  env PYTHONPATH="$SGL_PYTHONPATH" "$SGL_PY" lab/gpu/specforge_model.py "$M" --layers 32 --hidden "$HIDDEN" \
    --experts 32 --conversations 144 --max-tokens 2048 --distinct-lengths
  head -128 "$M/conversations.jsonl" >"$M/train.jsonl"
  tail -16 "$M/conversations.jsonl" >"$M/eval.jsonl"
  head -8 "$M/train.jsonl" >"$M/same.jsonl"
  server_up || { fail "the server did not start"; exit 1; }
  # SpecForge's vocabulary map of the training conversations: every run reads this one
  "${ENGINE[@]}" vocab --model "$M/model" --dataset "$M/train.jsonl" --draft "$M/draft.json" --out "$WORK/vocab_mapping.pt"
  # 1. the same tensors, one prompt a batch on both sides
  [ -n "${SKIP_SAME:-}" ] || { online_run same reader --dataset "$M/same.jsonl" --lease 1 --high 1 --low 1 \
    --timeout 300 && pass "online: 8 prompts read back from Mooncake by the reader" \
    || { fail "online: same"; tail -30 "$WORK/same/"*.log; }; }
  [ -n "${SKIP_SAME:-}" ] || { "${ENGINE[@]}" dataset --records "$WORK/same/output/same-reader/attempt-0001/records.jsonl" --out "$WORK/same-ids.jsonl"
  files_job same "$WORK/same-ids.jsonl" "$WORK/files-same" 1
  env PYTHONPATH="$ENGINE_PYTHONPATH" "$SGL_PY" tests/online/online_fleet_check.py \
    --records "$WORK/same/output/same-reader/attempt-0001/records.jsonl" --dataset "$WORK/same-ids.jsonl" \
    --count "$WORK/files-same" | tee "$WORK/same-check.json" \
    && pass "same tensors: Mooncake's features equal the files mode's .ckpt, bit for bit" || fail "same tensors"; }
  # 2. the files mode's extraction, timed, and the fixed eval set's (EVAL_SET_ONLY: the eval set alone, for an
  # online mode on a fresh machine whose files mode ran on an earlier one)
  [ -n "${EVAL_SET_ONLY:-}" ] || files_job train "$M/train.jsonl" "$WORK/files-train" "$FILES_CONCURRENCY"
  files_job eval "$M/eval.jsonl" "$WORK/files-eval" 1
  # 2b. one a batch against 16 at once: which samples' tensors the batching changed, by how much
  if [ -n "${ONE_A_BATCH:-}" ] && [ -n "${COMPARE_BATCHING:-}" ] && [ -z "${EVAL_SET_ONLY:-}" ]; then
    compare_batching
  fi
elif [ "$MODE" = batching ]; then
  # 2b alone, after an extract with ONE_A_BATCH=1 on the same machine
  server_up || { fail "the server did not start"; exit 1; }
  compare_batching
elif [ "$MODE" = train ]; then
  # 3. the files mode's training (the server is down: the files are all it needs), evaluated beside it
  files_trained files "$WORK/files-train"
elif [ "$MODE" = ordered ]; then
  # 6. the files mode's training again, its samples in the order the online run's trainer read them (the
  # order, not the tensors, set the modes' eval losses apart: docs/gpu-proofs.md, second lease)
  refs=$(find "$WORK/online-1" -name refs.jsonl | head -1)
  rm -rf "$WORK/files-ordered"
  "${ENGINE[@]}" order --refs "$refs" --dataset "$M/train.jsonl" --manifest "$WORK/files-train/manifest.sqlite" \
    --out "$WORK/files-ordered" --record "$RECORD" \
    && pass "SpecForge's offline trainer reads the files in online-1's order" || fail "the order"
  files_trained files-ordered "$WORK/files-ordered"
  "${ENGINE[@]}" steps --a "online-1:$WORK/online-1/consumer.log" --b "files-ordered:$WORK/train-files-ordered.log" \
    --record "$RECORD" && pass "every step's training loss agrees: the same sample at every step" \
    || fail "step losses apart"
  "${ENGINE[@]}" report --record "$RECORD" --pairs "files-ordered,online-1,0.01" "files,files-ordered" \
    && pass "online-1's eval losses within 0.01 of the files mode's in one order" || fail "eval losses apart"
elif [ "$MODE" = online ]; then
  # 4. the online mode: one run, the trainer beside the server on the one GPU (ONLINE_KILL_AT: with the fault of
  # step 5 in it, when the device time left cannot hold both; `ordered` then compares the faulted run)
  online_trained online-1 "${ONLINE_KILL_AT:-}"
elif [ "$MODE" = fault ]; then
  # 5. the server killed mid-run and brought back with its own command
  online_trained online-2 "$KILL_AT"
  grep -i -E "retry|re-?lease|requeue|failed" "$WORK/online-2/producer.log" | tail -12 | sed 's/^/[producer] /'
fi
if [ -n "${OUT:-}" ]; then
  # what comes back: at most 8 files a call, so the logs come in one archive, with \n line endings (progress
  # bars end their lines with \r; sanity: line endings)
  cp "$RECORD" "$OUT/" 2>/dev/null
  logs=$WORK/logs-$MODE
  rm -rf "$logs"; mkdir -p "$logs"
  for f in "$WORK"/ours.log "$WORK"/jobs/*.log "$WORK"/*/producer.log "$WORK"/*/consumer.log "$WORK"/*/gateway.log \
           "$WORK"/train-*.log "$WORK"/eval-*.log; do
    [ -f "$f" ] && tail -2000 "$f" | tr "\r" "\n" >"$logs/$(basename "$(dirname "$f")")-$(basename "$f")"
  done
  # each online run's refs in its trainer's read order (what `order` reads): the step losses name their samples
  for name in online-1 online-2; do
    f=$(find "$WORK/$name" -name refs.jsonl 2>/dev/null | head -1)
    [ -z "$f" ] || cp "$f" "$logs/$name-refs.jsonl"
  done
  tar -czf "$OUT/logs-$MODE.tar.gz" -C "$logs" .
fi
echo "== $MODE: $FAILS failure(s) =="
[ "$FAILS" = 0 ]
