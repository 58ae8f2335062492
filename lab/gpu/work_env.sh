# shellcheck shell=bash
# The set-up the multi-call GPU scripts share (lab/gpu/specforge_side_by_side.sh,
# lab/gpu/online_real_engine.sh), sourced from the repository root with WORK and KIT set:
# a first call (FRESH_WORK=1) gets ansible-core and a fresh $WORK from lab/gpu/lib.sh; a
# later call on the same machine keeps what the first made in $WORK and sets only the
# environment again. Then the PASS/FAIL helpers and the SGLang kit (lab/gpu/real_sglang.sh).
if [ -n "${FRESH_WORK:-}" ] || [ ! -d "$WORK" ]; then
  # shellcheck source=lab/gpu/lib.sh
  . lab/gpu/lib.sh   # ansible-core from .whl, the checkout as eagle3.extraction; makes $WORK
else
  export ANSIBLE_COLLECTIONS_PATH=$WORK/collections
  cleanup() { :; }
  [ -d /tmp/site ] && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
FAILS=0
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
pass() { echo "PASS $*"; }
# shellcheck source=lab/gpu/real_sglang.sh
. lab/gpu/real_sglang.sh   # the kit, patch_with_role, start_server, stop_server
