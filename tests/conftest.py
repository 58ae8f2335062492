"""Shared by every suite under tests/ (tests/README.md maps them).

The suites run in two virtualenvs: the controller's .venv (ansible-core, ansible-runner:
lab/bootstrap/venv.sh) and the torch venv (CPU torch for Python 3.11, aiohttp, the job's
package: lab/bootstrap/torch-venv.sh). Each venv lacks what the other's suites import, so a
suite is left out where its libraries are missing, and says so in the report's header: any set
of suites runs in one invocation, and the venv picks the ones it can run.
"""

from __future__ import annotations

import functools
import importlib.util
import signal
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# the suites of the torch venv (`make pytest-torch`); every other suite is the controller's
TORCH_SUITES = ('capture', 'job', 'online')
TORCH_NEEDS = ('torch', 'aiohttp')
CONTROLLER_NEEDS = ('ansible', 'ansible_runner')
# every test of these suites has a deadline, in seconds: a test that waits on the job or the capture
# for ever (for a pause that never comes) fails instead of hanging the whole run. A module or a test
# sets its own with @pytest.mark.timeout(N). pytest-timeout enforces it (lab/bootstrap/torch-venv.sh
# installs it) and fails that test alone; in a venv without it, a fixture below does the same by
# SIGALRM.
DEADLINE_S = {'job': 300, 'capture': 300}


@functools.cache
def _missing(modules):
    return [name for name in modules if importlib.util.find_spec(name) is None]


def _suite(path):
    """The suite folder a path lies in (tests/<suite>/...), or None outside one."""
    try:
        parts = Path(path).resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if parts and (TESTS / parts[0]).is_dir() else None


def _left_out(suite):
    """What this venv lacks to run the suite (empty when it runs here)."""
    if suite is None:
        return []
    return _missing(TORCH_NEEDS if suite in TORCH_SUITES else CONTROLLER_NEEDS)


def pytest_ignore_collect(collection_path, config):  # pylint: disable=unused-argument
    if _left_out(_suite(collection_path)):
        return True
    return None  # pytest's own rules decide


def pytest_report_header(config):  # pylint: disable=unused-argument
    lines = []
    for suite in sorted(p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob('**/test_*.py'))):
        missing = _left_out(suite)
        if missing:
            lines.append('tests/%s left out: no %s in this venv' % (suite, ', '.join(missing)))
    return lines


def pytest_collection_modifyitems(items):
    """The torch suites' tests carry the `torch` marker (pytest.ini), so that `-m` selects them; those of
    DEADLINE_S a deadline, unless they set their own."""
    for item in items:
        suite = _suite(item.path)
        if suite in TORCH_SUITES:
            item.add_marker(pytest.mark.torch)
        if suite in DEADLINE_S and item.get_closest_marker('timeout') is None:
            item.add_marker(pytest.mark.timeout(DEADLINE_S[suite]))


@pytest.fixture(autouse=True)
def _deadline_without_pytest_timeout(request):
    """The deadline where pytest-timeout is missing: SIGALRM fails the test there, as that plugin's
    own signal method does."""
    marker = request.node.get_closest_marker('timeout')
    if marker is None or request.config.pluginmanager.hasplugin('timeout'):
        yield
        return
    seconds = marker.args[0]

    def past_deadline(_signum, _frame):
        pytest.fail('Timeout: past the test\'s deadline of %s s (tests/conftest.py)' % seconds, pytrace=True)
    before = signal.signal(signal.SIGALRM, past_deadline)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
