# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the extraction job's tests (the torch venv; tests/conftest.py leaves them out
elsewhere); what the tests share besides fixtures is in job_helpers.py."""
import pytest


@pytest.fixture
def job_dirs(tmp_path):
    dump = tmp_path / "shm" / "sglang_hs"
    out = tmp_path / "out" / "host1"
    dump.mkdir(parents=True)
    return {"dump": str(dump), "out": str(out), "root": tmp_path}
