# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every test of the job and the capture has a deadline (tests/conftest.py): one that waits for the
job to pause, and the pause never comes, fails instead of hanging the run."""
import os
import shutil
import subprocess
import sys
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WAITING_TESTS = '''
import time

import pytest


@pytest.mark.timeout(2)
def test_waits_for_a_pause_that_never_comes():
    while True:
        time.sleep(0.05)


def test_has_a_deadline_it_did_not_set(request):
    assert request.node.get_closest_marker("timeout").args[0] > 0
'''


def test_a_test_that_waits_for_ever_fails_at_its_deadline(tmp_path):
    # tests/ of its own, with our conftest and a tests/job and tests/capture to hold the tests
    shutil.copy(os.path.join(TESTS, "conftest.py"), tmp_path / "conftest.py")
    for suite in ("job", "capture"):
        (tmp_path / suite).mkdir()
        (tmp_path / suite / f"test_waiting_{suite}.py").write_text(WAITING_TESTS)
    for suite in ("job", "capture"):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(tmp_path / suite)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=False)
        output = done.stdout + done.stderr
        # that test alone fails, at its deadline, and the run goes on
        assert done.returncode == 1 and "Timeout" in output and "1 failed, 1 passed" in output, output
        assert time.monotonic() - started < 60
