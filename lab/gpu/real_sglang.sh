# shellcheck shell=bash
# Real SGLang 0.5.14 on the GPU machine, shared by lab/gpu/capture_real_sglang.sh and
# lab/gpu/specforge_side_by_side.sh (sourced from the repository root after
# lab/gpu/lib.sh, with WORK and KIT set): the offline kit installed once
# (../shared/recipes/real-sglang; $SGL_PY, $SGL_PYTHONPATH), the sglang_patch role run on
# it, and servers started and stopped as systemd would (start_server, stop_server).

# -- the kit -------------------------------------------------------------------------
if [ ! -f "$KIT/env.sh" ]; then
  cp -r .kit/p00/. "$KIT/"
  if ! bash "$KIT/install.sh" >"$WORK/install.log" 2>&1; then
    tail -30 "$WORK/install.log"; echo "FAIL the kit did not install"; exit 1
  fi
fi
# the server runs with the kit's own PYTHONPATH (none in venv mode), not ansible's
SGL_PYTHONPATH=$(unset PYTHONPATH; . "$KIT/env.sh"; echo "${PYTHONPATH:-}")
SGL_PY=$(unset PYTHONPATH; . "$KIT/env.sh"; command -v "$SGL_PY")  # the role wants a path
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} FLASHINFER_WORKSPACE_BASE=/tmp/fi_ws
export PATH=$CUDA_HOME/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# -- the patch, by the role ------------------------------------------------------------
patch_with_role() {
  local run=$1
  # the role runs the venv's python: it must see the kit's packages (target mode: PYTHONPATH)
  env PYTHONPATH="${SGL_PYTHONPATH:+$SGL_PYTHONPATH:}$PYTHONPATH" ansible-playbook -i localhost, lab/gpu/capture_patch.yml \
    -e "proof_python=$SGL_PY" >"$WORK/patch-$run.log" 2>&1
  local rc=$?
  grep -E '^localhost *:' "$WORK/patch-$run.log" | sed "s/^/[patch run $run] /"
  [ "$rc" = 0 ] || tail -25 "$WORK/patch-$run.log"
  return "$rc"
}
# -- servers -------------------------------------------------------------------------
http_status() {  # port path -> the HTTP status code (no curl on that machine, maybe)
  ( exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
    IFS=' ' read -r -t 30 _ code _ <&3 && echo "$code" ) 2>/dev/null || echo 000
}
SERVER_PGID=
TP=${TP:-1}
SERVER_ENV=()   # extra environment of the next server (GPUs, NCCL)
SERVER_UNSET=() # env -u NAME ... for the next server
start_server() {  # name port dump_dir(or -) model_dir layer_ids [flags...]; sets SERVER_PGID
  local name=$1 port=$2 dump=$3 model=$4 layers=$5 t0=$SECONDS
  shift 5
  local envs=("${SERVER_UNSET[@]}" PYTHONPATH="$SGL_PYTHONPATH" "${SERVER_ENV[@]}")
  [ "$dump" = - ] || envs+=(SGLANG_HS_DUMP_DIR="$dump" SGLANG_HS_LAYER_IDS="$layers"
                            SGLANG_HS_WRITER_THREADS="${CAPTURE_WRITERS:-8}")
  setsid env "${envs[@]}" "$SGL_PY" -m sglang.launch_server --model-path "$model" \
    --load-format dummy --skip-tokenizer-init --tp-size "$TP" --random-seed 42 \
    --disable-cuda-graph --disable-radix-cache --disable-custom-all-reduce \
    --attention-backend triton --sampling-backend pytorch --mem-fraction-static "${SGL_MEM_FRACTION:-0.5}" \
    --host 127.0.0.1 --port "$port" "$@" </dev/null >"$WORK/$name.log" 2>&1 &
  SERVER_PGID=$!
  for _ in $(seq 600); do
    [ "$(http_status "$port" /health)" = 200 ] && {
      echo "[$name] healthy after $((SECONDS - t0)) s (pgid $SERVER_PGID)"; return 0; }
    kill -0 "$SERVER_PGID" 2>/dev/null || break
    sleep 0.5
  done
  echo "[$name] not healthy after $((SECONDS - t0)) s; last log lines:"; tail -15 "$WORK/$name.log"
  stop_server; return 1
}
stop_server() {  # SIGTERM to the process group (systemd's KillMode=control-group), then SIGKILL
  [ -n "$SERVER_PGID" ] || return 0
  kill -TERM -- "-$SERVER_PGID" 2>/dev/null
  for _ in $(seq 120); do kill -0 -- "-$SERVER_PGID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$SERVER_PGID" 2>/dev/null
  SERVER_PGID=
}
