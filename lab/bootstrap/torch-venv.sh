#!/usr/bin/env bash
# The one virtualenv of the tests that need torch (tests/capture: the capture module;
# tests/job: the extraction job): CPU torch (cp311 only, so Python 3.11, beside the
# controller's .venv on 3.12), the job's runtime libraries as sglang's own venv has them
# (aiohttp, transformers for chat templates) and SpecForge's offline loader, installed
# without its dependencies (it would pull CUDA wheels) so the tests read our outputs with it;
# datasets (with pyarrow and pandas, what pip resolves for it) for SpecForge's own
# preprocessing, which tests/job/test_chat_matches_specforge.py compares the job with.
# pytest-timeout, which holds every test of tests/job and tests/capture to its deadline
# (tests/conftest.py). Mooncake's CUDA-less client and master (the online mode's store: tests/online), and the job's
# own package (roles/extraction_job/files), editable.
# Idempotent: a venv whose pins already match is left alone.
# Usage: lab/bootstrap/torch-venv.sh   -> prints the venv's python path
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${TORCH_VENV:-.venv-torch}
PINS=("torch==2.13.0" "pytest==9.2.0" "pytest-timeout==2.4.0" "pyyaml==6.0.4" "aiohttp==3.14.5"
  "transformers==5.23.0" "jinja2==3.1.6" "datasets==5.2.0"
  "mooncake-transfer-engine-non-cuda==0.3.13.post1")
NODEPS=("specforge==0.2.0")

pick_python() {
  for cand in /usr/bin/python3.11 python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
      "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "$cand"; return
    fi
  done
  echo "no Python 3.11 found (the CPU torch wheel is built for 3.11 only)" >&2; exit 1
}

stamp=$VENV/.pins-$(printf '%s\n' "${PINS[@]}" "${NODEPS[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  PY=$(pick_python)
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "${PINS[@]}"
  "$VENV/bin/pip" install -q --no-deps "${NODEPS[@]}"
  rm -f "$VENV"/.pins-*
  touch "$stamp"
fi
# the job itself, editable, so that its tests import it as the installed package and see
# every change of its source at once; a change of its pyproject.toml installs it again
job_stamp=$VENV/.job-$(sha256sum roles/extraction_job/files/pyproject.toml | cut -c1-16)
if [ ! -f "$job_stamp" ]; then
  "$VENV/bin/pip" install -q --no-deps --no-build-isolation --no-index -e roles/extraction_job/files
  rm -f "$VENV"/.job-*
  touch "$job_stamp"
fi
echo "$VENV/bin/python"
