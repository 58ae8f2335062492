#!/usr/bin/env bash
# `check && pass "..." || fail "..."` is this script's idiom: pass only echoes, so fail runs only when check failed
# shellcheck disable=SC2015
# The collection beside SpecForge 0.2.0's own pipeline (scripts/prepare_hidden_states.py),
# on real SGLang 0.5.14 on the GPU machine, one model and one set of conversations:
#
#   tensors  a 61-layer DeepSeek-V3-shaped model with sglang's seeded dummy weights and a
#            word-level tokenizer with Qwen's ChatML template (lab/gpu/specforge_model.py),
#            80 conversations of 22 to 4,000 tokens. (a) the collection: the sglang_patch
#            role, a server with SGLANG_HS_LAYER_IDS=1,29,57, the extraction job on the
#            conversations (its own tokenization); (b) SpecForge's script with its
#            defaults on the same model dir and conversations. Once one prompt at a time
#            on both sides (job concurrency 1, --batch-size 1: bit for bit), once as each
#            runs by default (job concurrency 16 into chunked prefill and mixed batches;
#            --batch-size 32): lab/gpu/specforge_compare.py sample by sample, and the
#            layers each side resolved.
#   train    SpecForge's own EAGLE-3 offline training (specforge train) for 120 steps with
#            a one-layer draft, once on our default-run output, once on SpecForge's, each
#            evaluated every 25 steps on the same fixed set (our one-at-a-time output,
#            bit-equal to SpecForge's): the two loss curves (a table, a PNG in $OUT). Run
#            after tensors, on the same machine.
#   speed    the wide model (hidden 7168, 32 layers, 32 experts), 384 conversations of
#            2,048 tokens: tokens/s from the first request until every file is durable,
#            server + job against prepare_hidden_states.py (--batch-size 16 and 32, or
#            SPEED_BATCHES; IO threads: all 16 cores, its default), and the output disk's
#            own parallel fsynced write rate for the same bytes; a summary table with the
#            ratio ours / SpecForge's best to three decimals. Patches the kit itself (the
#            sglang_patch role): runs alone on a fresh machine.
#
# Needs, as lab/gpu/capture_real_sglang.sh does, the SGLang kit (parts in /tmp/kit, p00
# in .kit/p00) and ansible-core's wheels in .whl, plus .kit/sf from
# lab/gpu/specforge_kit.sh (specforge and yunchang wheels, SpecForge's script), copied
# into /tmp/kit/sf by a call or carried. From the repository root:
#     bash lab/gpu/specforge_side_by_side.sh all     # tensors, train, speed, in one go
#     bash lab/gpu/specforge_side_by_side.sh tensors|train|speed
# (tensors-ours then tensors-specforge split tensors in two, for calls of at most 10 minutes)
# Prints PASS/FAIL lines; exit code 0 only if every check passed.
set -uo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.." || exit 1
MODE=${1:-tensors}
if [ "$MODE" = all ]; then
  rc=0
  for mode in tensors train speed; do bash "$SELF" "$mode" || rc=1; done
  exit "$rc"
fi
WORK=${SIDE_BY_SIDE_WORK:-/tmp/side_by_side}
KIT=${KIT:-/tmp/kit}
NVIDIA_SMI=nvidia-smi
mkdir -p "$KIT"
FRESH_WORK=$([ "$MODE" = tensors ] || [ "$MODE" = tensors-ours ] && echo 1)
# shellcheck source=lab/gpu/work_env.sh
. lab/gpu/work_env.sh   # ansible-core, $WORK, pass/fail, the kit
trap 'stop_server; cleanup' EXIT

# SpecForge beside the kit: its wheels in a folder of their own, on its PYTHONPATH only
SF=$KIT/sf
[ -d "$SF" ] || { mkdir -p "$SF"; cp -r .kit/sf/. "$SF/"; }
SF_SITE=/tmp/sfsite
if [ ! -d "$SF_SITE/specforge" ]; then
  (cd "$SF/wheels" && sha256sum -c --quiet ../SHA256SUMS) || { echo "FAIL SpecForge's wheels"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SF_SITE" "$SF"/wheels/*.whl
fi
# SpecForge's script keeps a dataset cache beside its own folder: its own copy in $WORK
mkdir -p "$WORK/specforge/scripts"
cp "$SF/scripts/prepare_hidden_states.py" "$WORK/specforge/scripts/"
SF_SCRIPT=$WORK/specforge/scripts/prepare_hidden_states.py
SF_ENV=(PYTHONPATH="$SF_SITE${SGL_PYTHONPATH:+:$SGL_PYTHONPATH}" NCCL_NVLS_ENABLE=0)
SGL_ENV=(PYTHONPATH="$SGL_PYTHONPATH")
SIDE=(lab/gpu/side_by_side.py)
echo "== the collection beside SpecForge: $MODE ($(date -u +%FT%TZ)) =="
echo "[machine] $("$NVIDIA_SMI" --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tr '\n' ';') $(nproc) cores"
echo "[versions] $(env "${SF_ENV[@]}" "$SGL_PY" -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in ("sglang", "torch", "transformers", "specforge")))' 2>&1 | tail -1)"

our_layers() {  # dump dir -> the layers our capture resolved, from its stats file
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("captured_layers"), "from SGLANG_HS_LAYER_IDS", d.get("layer_ids"))' \
    "$1/CAPTURE_STATS.json" 2>/dev/null || echo "(no CAPTURE_STATS.json in $1)"
}
collection_side() {  # model_dir dataset dump out_prefix layer_ids server_flags... ; runs named jobs
  local model=$1 data=$2 dump=$3 out=$4 layers=$5
  shift 5
  rm -rf "$dump"; mkdir -p "$dump"
  start_server ours 30020 "$dump" "$model" "$layers" "$@" || { fail "our server did not start"; return 1; }
  echo "[ours] layers resolved by the capture: $(our_layers "$dump")"
  for run in $JOB_RUNS; do
    local name=${run%%:*} conc=${run#*:}
    rm -rf "$out-$name"
    env "${SGL_ENV[@]}" "$SGL_PY" "${SIDE[@]}" job --name "$name" --model "$model" --dataset "$data" \
      --out "$out-$name" --work "$WORK/jobs" --url http://127.0.0.1:30020 --dump "$dump" \
      --concurrency "$conc" --drain-workers "${DRAIN_WORKERS:-4}" && pass "job $name (concurrency $conc)" \
      || { fail "job $name"; tail -20 "$WORK/jobs/$name.log"; }
  done
  stop_server
}
specforge_side() {  # model_dir dataset draft out name [prepare_hidden_states args...]
  local model=$1 data=$2 draft=$3 out=$4 name=$5
  shift 5
  rm -rf "$out"
  env "${SF_ENV[@]}" "$SGL_PY" "${SIDE[@]}" specforge --name "$name" --model "$model" --dataset "$data" \
    --out "$out" --work "$WORK/specforge" --script "$SF_SCRIPT" --draft "$draft" -- "$@" \
    && pass "SpecForge $name ($*)" || fail "SpecForge $name"
}

if [ "$MODE" = tensors ] || [ "$MODE" = tensors-ours ]; then
  patch_with_role 1 && pass "sglang_patch role patched the kit's deepseek_v2.py" || fail "sglang_patch role"
  M=$WORK/m61
  env "${SGL_ENV[@]}" "$SGL_PY" lab/gpu/specforge_model.py "$M" --layers 61 --hidden 512 \
    --experts 16 --conversations 80 --max-tokens 4000
  JOB_RUNS="single:1 default:16" collection_side "$M/model" "$M/conversations.jsonl" /dev/shm/hs-sbs \
    "$WORK/ours" 1,29,57
fi
if [ "$MODE" = tensors ] || [ "$MODE" = tensors-specforge ]; then
  M=$WORK/m61
  specforge_side "$M/model" "$M/conversations.jsonl" "$M/draft.json" "$WORK/sf-single" single --batch-size 1
  specforge_side "$M/model" "$M/conversations.jsonl" "$M/draft.json" "$WORK/sf-default" default
  compare() { env "${SGL_ENV[@]}" "$SGL_PY" lab/gpu/specforge_compare.py "$@" || FAILS=$((FAILS + 1)); }
  compare "$WORK/ours-single" "$WORK/sf-single" --label "one prompt at a time (ours vs SpecForge)" --bit-equal
  # SpecForge's default batches pad every sample to its batch's longest and drop the last,
  # partial batch (its DataLoader's drop_last): paired without the padding, the dropped ones named
  compare "$WORK/ours-default" "$WORK/sf-default" --label "each as it runs by default (ours vs SpecForge)" \
    --strip-padding --theirs-may-drop
  compare "$WORK/ours-default" "$WORK/ours-single" --label "ours: default vs one at a time"
  compare "$WORK/sf-single" "$WORK/sf-default" --label "SpecForge: batch 1 vs batch 32" \
    --strip-padding --theirs-may-drop
elif [ "$MODE" = train ]; then
  M=$WORK/m61
  for side in ours-default sf-default; do
    mkdir -p "$WORK/train-$side"
    cat >"$WORK/train-$side/config.yaml" <<EOF
model:
  target_model_path: $M/model
  draft_model_config: $M/draft.json
  target_backend: sglang
  torch_dtype: bfloat16
data:
  hidden_states_path: $WORK/$side
  eval_hidden_states_path: $WORK/ours-single
  max_length: 4096
  chat_template: qwen
  cache_dir: $WORK/train-$side/cache
training:
  strategy: eagle3
  num_epochs: 2
  max_steps: 120
  batch_size: 1
  learning_rate: 1.0e-3
  max_grad_norm: 0.5
  ttt_length: 7
  attention_backend: sdpa
  log_interval: 1
  save_interval: 0
  eval_interval: 25
  seed: 0
run_id: side-by-side-$side
output_dir: $WORK/train-$side/out
deployment:
  mode: local_colocated
  trainer:
    nnodes: 1
    nproc_per_node: 1
EOF
    echo "-- specforge train -c $WORK/train-$side/config.yaml"
    if env "${SF_ENV[@]}" timeout 280 "$SGL_PY" -m specforge.cli train -c "$WORK/train-$side/config.yaml" \
        >"$WORK/train-$side/train.log" 2>&1; then
      pass "SpecForge trained on $side"
    else
      fail "SpecForge training on $side"; grep -v -i warn "$WORK/train-$side/train.log" | tail -25
    fi
  done
  env "${SGL_ENV[@]}" "$SGL_PY" "${SIDE[@]}" losses --labels "our files" "SpecForge's files" \
    --logs "$WORK/train-ours-default/train.log" "$WORK/train-sf-default/train.log" \
    --png "${OUT:-$WORK}/specforge-training-losses.png" || FAILS=$((FAILS + 1))
  for side in ours-default sf-default; do cp "$WORK/train-$side/train.log" "${OUT:-$WORK}/train-$side.log"; done
elif [ "$MODE" = speed ]; then
  # the patch by the role here too: this mode runs alone on a fresh machine
  patch_with_role 1 && pass "sglang_patch role patched the kit's deepseek_v2.py" || fail "sglang_patch role"
  M=$WORK/wide
  OUTDIR=${SPEED_OUT:-/tmp/speed-out}
  export SIDE_BY_SIDE_RECORD=$WORK/speed-results.jsonl
  rm -f "$SIDE_BY_SIDE_RECORD"
  env "${SGL_ENV[@]}" "$SGL_PY" lab/gpu/specforge_model.py "$M" --layers 32 --hidden 7168 \
    --experts 32 --conversations 384 --min-tokens 2048 --max-tokens 2048 --single-round
  echo "[disks] $(df -h /dev/shm | tail -1); $(df -h /tmp | tail -1)"
  DRAIN_WORKERS=8 JOB_RUNS="speed:32" collection_side "$M/model" "$M/conversations.jsonl" \
    /dev/shm/hs-speed "$OUTDIR/ours" 1,15,28
  bytes=$(du -sb "$OUTDIR/ours-speed" | cut -f1)
  rm -rf "$OUTDIR/ours-speed"
  for bs in ${SPEED_BATCHES:-16 32}; do
    specforge_side "$M/model" "$M/conversations.jsonl" "$M/draft.json" "$OUTDIR/sf-$bs" "speed-bs$bs" \
      --batch-size "$bs"
    rm -rf "$OUTDIR/sf-$bs"
  done
  for writers in 8 16; do
    env "${SGL_ENV[@]}" "$SGL_PY" "${SIDE[@]}" disk --path "$OUTDIR/disk" --bytes "$bytes" \
      --file-bytes $((2048 * 57344)) --writers "$writers"
  done
  rm -rf "$OUTDIR"
  python3 "${SIDE[@]}" summary --record "$SIDE_BY_SIDE_RECORD" --bytes "$bytes" || FAILS=$((FAILS + 1))
fi
# what comes back: the server's, the jobs' and SpecForge's logs (the last 2,000 lines each)
if [ -n "${OUT:-}" ]; then
  for f in "$WORK"/ours.log "$WORK"/jobs/*.log "$WORK"/specforge/*.log; do
    [ -f "$f" ] && tail -2000 "$f" >"$OUT/$(basename "$(dirname "$f")")-$(basename "$f")"
  done
fi
echo "== $MODE: $FAILS failure(s) =="
[ "$FAILS" = 0 ]
