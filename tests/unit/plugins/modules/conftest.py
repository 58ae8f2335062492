"""The signals fixture of the reclaim modules' tests (test_port_reclaim.py, test_process_reclaim.py)."""

from __future__ import annotations

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils import reclaim
from ansible_collections.eagle3.extraction.plugins.modules import process_reclaim


@pytest.fixture
def signals(monkeypatch):
    """Every terminate() call and every os.kill the modules would make, recorded instead of sent."""
    sent = {'terminate': [], 'kill': []}

    def terminate(targets, signal_timeout, kill_timeout, **_kwargs):
        sent['terminate'].append([t.pid for t in targets])
        result = reclaim.TerminateResult()
        result.killed = [{'pid': t.pid, 'signal': 'SIGTERM'} for t in targets]
        return result

    monkeypatch.setattr(reclaim, 'terminate', terminate)
    monkeypatch.setattr(reclaim.os, 'kill', lambda pid, sig: sent['kill'].append((pid, sig)))
    monkeypatch.setattr(process_reclaim.os, 'kill', lambda pid, sig: sent['kill'].append((pid, sig)))
    return sent
