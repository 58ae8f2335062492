"""Safety rules and the signal/escalate/wait loop (plugins/module_utils/reclaim.py),
with real processes: what never gets signalled, and what SIGTERM/SIGKILL do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, reclaim

FIXTURES = REPO / 'tests' / 'unit' / 'fixtures' / 'proc'

IGNORE_TERM = [sys.executable, '-c',
               'import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
               'print("ready", flush=True); time.sleep(60)']


def start(argv):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    if argv is IGNORE_TERM:
        assert proc.stdout.readline().strip() == 'ready'
    return proc, procfs.read_process(proc.pid)


def test_pid1_self_and_ancestors_are_protected():
    protection = reclaim.Protection()
    assert protection.reason(procfs.read_process(1)) == 'PID 1 (init)'
    assert protection.reason(procfs.read_process(os.getpid())) == 'the reclaim module itself'
    for pid in procfs.ancestors(os.getpid()):
        if pid != 1:
            assert 'ancestor' in protection.reason(procfs.read_process(pid))


def test_kernel_threads_and_namespace_inits_are_protected():
    index = json.loads((FIXTURES / 'index.json').read_text())
    host = str(FIXTURES / 'host')
    # judged as seen from a module that is none of these captured processes' descendant
    protection = reclaim.Protection(proc_root=host, own_pid=10 ** 7)
    kthreadd = procfs.read_process(2, host)
    assert protection.reason(kthreadd) == 'a kernel thread'
    fake = procfs.Process(pid=10 ** 7 + 1, ppid=2, uid=0, state='S', name='kworker/0:1', cmdline=[],
                          nspid=[10 ** 7 + 1], starttime=1, kernel_thread=True)
    assert protection.reason(fake) == 'a kernel thread'
    init = procfs.read_process(index['host']['roles']['sandbox_init'], host)
    assert protection.reason(init) == 'the init (PID 1) of a PID namespace (a container)'


def test_an_unrelated_child_is_not_protected():
    child, proc = start(['sleep', '30'])
    try:
        assert reclaim.Protection().reason(proc) is None
    finally:
        child.kill()
        child.wait()


def test_sigterm_is_enough_for_a_plain_process():
    child, proc = start(['sleep', '30'])
    try:
        result = reclaim.terminate([proc], signal_timeout=5, kill_timeout=5)
        assert result.killed == [{'pid': proc.pid, 'signal': 'SIGTERM'}]
        assert result.survivors == [] and result.errors == []
    finally:
        child.kill()
        child.wait()


def test_sigterm_ignored_then_sigkill_after_signal_timeout():
    child, proc = start(IGNORE_TERM)
    try:
        began = time.monotonic()
        result = reclaim.terminate([proc], signal_timeout=0.5, kill_timeout=5)
        took = time.monotonic() - began
        assert result.killed == [{'pid': proc.pid, 'signal': 'SIGTERM'}, {'pid': proc.pid, 'signal': 'SIGKILL'}]
        assert result.survivors == []
        assert 0.5 <= took < 1.0
    finally:
        child.kill()
        child.wait()


def test_a_reused_pid_is_not_signalled():
    child, proc = start(['sleep', '30'])
    try:
        stale = procfs.Process(pid=proc.pid, ppid=proc.ppid, uid=proc.uid, state='S', name=proc.name,
                               cmdline=proc.cmdline, nspid=proc.nspid, starttime=proc.starttime - 1,
                               kernel_thread=False)
        result = reclaim.terminate([stale], signal_timeout=1, kill_timeout=1)
        assert result.killed == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_eperm_is_reported_without_waiting():
    """An owner we may not signal: terminate() run as nobody against a root process."""
    child, proc = start(['sleep', '30'])
    script = (
        'import json, os\n'
        'from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, reclaim\n'
        'target = procfs.read_process(%d)\n'
        'os.setgid(65534); os.setuid(65534)\n'
        'r = reclaim.terminate([target], signal_timeout=5, kill_timeout=5)\n'
        'print(json.dumps({"killed": r.killed, "errors": r.errors, "survivors": [p.pid for p in r.survivors]}))\n'
        % proc.pid)
    try:
        began = time.monotonic()
        env = dict(os.environ, PYTHONPATH=str(REPO / '.ansible' / 'collections'))
        out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True,
                             env=env).stdout
        result = json.loads(out)
        assert result['killed'] == [] and result['survivors'] == [proc.pid]
        assert [(e['pid'], e['signal']) for e in result['errors']] == [(proc.pid, 'SIGTERM')]
        assert time.monotonic() - began < 4
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_wait_reaped_follows_the_zombie_until_its_parent_reaps_it():
    child, proc = start(['sleep', '30'])
    child.kill()
    deadline = time.monotonic() + 5
    while procfs.read_process(child.pid).state != 'Z' and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reclaim.wait_reaped([proc], 0.2) == [proc]
    child.wait()
    assert reclaim.wait_reaped([proc], 0.2) == []


def test_validate_common_names_the_options():
    errors = reclaim.validate_common({'signal_timeout': -1, 'kill_timeout': 0, 'command_timeout': 5, 'vmid': 99})
    # validate_common converts the numbers as the module got them (type raw): a float option's -1 is -1.0
    assert errors == ['signal_timeout: -1.0 is out of range; give a number from 0 to 3600 seconds',
                      'vmid: 99 is not a Proxmox container id; give an integer from 100 to 999999999']
    assert reclaim.validate_common({'signal_timeout': 0, 'kill_timeout': 1, 'command_timeout': 5, 'vmid': None}) == []
