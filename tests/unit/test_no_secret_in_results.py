"""A real process with an API key on its command line (as SGLang's was, with --api-key): no
result of port_reclaim or process_reclaim carries the key, in check mode or when they kill it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import port_reclaim, process_reclaim

SECRET = 'sk-test-9f8e7d6c5b4a'
TITLE = 'eagle3-secret-holder-test'
LISTENER = ('import socket, sys, time\n'
            's = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()\n'
            'print(s.getsockname()[1], flush=True)\n'
            'time.sleep(120)\n')


@pytest.fixture
def holder():
    """A listener started as `python3 -c ... eagle3-secret-holder-test --api-key <key> HF_TOKEN=<key>`."""
    child = subprocess.Popen([sys.executable, '-c', LISTENER, TITLE, '--api-key', SECRET, 'HF_TOKEN=' + SECRET],
                             stdout=subprocess.PIPE, text=True)
    port = int(child.stdout.readline())
    yield child, port
    child.kill()
    child.wait()


def test_port_reclaim_check_mode_shows_the_holder_without_its_key(holder, run_module):
    child, port = holder
    result = run_module(port_reclaim, {'port': port, 'address': '127.0.0.1', '_ansible_check_mode': True})
    out = json.dumps(result)
    assert [h['pid'] for h in result['holders']] == [child.pid]
    assert SECRET not in out
    assert '--api-key <redacted> HF_TOKEN=<redacted>' in result['holders'][0]['cmdline']
    assert child.poll() is None


def test_port_reclaim_kills_the_holder_and_returns_no_key(holder, run_module):
    child, port = holder
    result = run_module(port_reclaim, {'port': port, 'address': '127.0.0.1', 'signal_timeout': 5})
    out = json.dumps(result)
    assert result['changed'] is True and result['port_free'] is True
    assert SECRET not in out
    assert child.wait(timeout=10) is not None


def test_process_reclaim_matches_the_holder_and_returns_no_key(holder, run_module):
    child, _port = holder
    result = run_module(process_reclaim, {'match': [TITLE], 'signal_timeout': 5})
    out = json.dumps(result)
    assert [m['pid'] for m in result['matched']] == [child.pid]
    assert SECRET not in out
    assert child.wait(timeout=10) is not None


def test_process_reclaim_selecting_by_the_key_itself_does_not_return_it(holder, run_module):
    # the pattern that selected a process is named by its place in the list, not its text
    child, _port = holder
    result = run_module(process_reclaim, {'match': [TITLE, SECRET], '_ansible_check_mode': True})
    assert [m['matched_by'] for m in result['matched']] == [['match[0]', 'match[1]']]
    assert SECRET not in json.dumps(result)
    assert child.poll() is None
