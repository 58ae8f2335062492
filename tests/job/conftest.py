# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the extraction job's tests (CPU torch venv: lab/bootstrap/torch-venv.sh); what the tests
share besides fixtures is in job_helpers.py."""
import pytest

try:
    import torch  # noqa: F401  pylint: disable=unused-import
    import aiohttp  # noqa: F401  pylint: disable=unused-import
except ImportError:
    # another venv (the controller's .venv runs `pytest tests`): these tests run in the job's
    # torch venv, `bash lab/bootstrap/torch-venv.sh && .venv-torch/bin/python -m pytest tests/job`
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def job_dirs(tmp_path):
    dump = tmp_path / "shm" / "sglang_hs"
    out = tmp_path / "out" / "host1"
    dump.mkdir(parents=True)
    return {"dump": str(dump), "out": str(out), "root": tmp_path}
