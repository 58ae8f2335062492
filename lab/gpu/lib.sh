# shellcheck shell=bash
# Shared set-up of the real GPU proofs (sourced by lab/gpu/*_proof.sh, from the
# repository root, with WORK and NVIDIA_SMI set): ansible-core from the carried
# wheels, the checkout as eagle3.extraction, and the helpers both proofs use.
rm -rf "$WORK"; mkdir -p "$WORK/collections/ansible_collections/eagle3"

# ansible-core from the carried wheels, unless there already is one (a later call on the
# same machine finds the one an earlier call installed in /tmp/site, with no .whl carried)
if ! command -v ansible-playbook >/dev/null; then
  if [ ! -x /tmp/site/bin/ansible-playbook ] && [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  fi
  export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
ln -sfn "$PWD" "$WORK/collections/ansible_collections/eagle3/extraction"
export ANSIBLE_COLLECTIONS_PATH=$WORK/collections ANSIBLE_ROLES_PATH=$PWD/roles
export ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=false
ANSIBLE_PYTHON_INTERPRETER=$(command -v python3)
export ANSIBLE_PYTHON_INTERPRETER

HOLDER_PID=
export HOLDER_GPUS=${HOLDER_GPUS:-all}  # lab/gpu/holder.py: which GPUs it holds
cleanup() {
  # only the holder this script started
  if [ -n "$HOLDER_PID" ] && kill -0 "$HOLDER_PID" 2>/dev/null; then kill -9 "$HOLDER_PID"; fi
}
trap cleanup EXIT

gpu_memory() { "$NVIDIA_SMI" --query-gpu=index,memory.used --format=csv,noheader,nounits | tr '\n' ';'; }

field() {  # json-file python-expression-on-r
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

# Start the holder (lab/gpu/holder.py, or $GPU_PROOF_HOLDER for a rehearsal with the
# stand-in) in its own session and set HOLDER_PID; returns 1, log on stdout, if it never held.
start_holder() {
  setsid bash -c "exec ${GPU_PROOF_HOLDER:-python3 lab/gpu/holder.py $HOLDER_MIB}" </dev/null >"$WORK/holder.log" 2>&1 &
  disown  # its SIGKILL is the point, not a job to report
  for _ in $(seq 600); do grep -q 'holding pid=' "$WORK/holder.log" && break; sleep 0.2; done
  HOLDER_PID=$(grep -o 'holding pid=[0-9]*' "$WORK/holder.log" | cut -d= -f2)
  [ -n "$HOLDER_PID" ] || { cat "$WORK/holder.log"; return 1; }
}
