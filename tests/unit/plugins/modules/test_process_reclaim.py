"""process_reclaim, in-process (the run_module fixture of tests/unit/conftest.py):
- bad option values fail before anything is read or signalled, with a message naming the
  option and what is allowed; a GPU wait fails clearly without a working nvidia-smi;
- with vmid it selects only the processes of that container;
- matched command lines come back with their secrets redacted.

/proc is replaced by the lists the module would have read; signalling is replaced by a recorder
(the signals fixture), so a wrong selection shows up as a recorded signal instead of a killed process."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, reclaim
from ansible_collections.eagle3.extraction.plugins.modules import process_reclaim
from reclaim_fakes import INIT, SECRET, SERVER, proc

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize('args, message', [
    ({'match': ['sglang::(']}, "match[0]: 'sglang::(' is not a valid regular expression"),
    ({'match': []}, 'match is empty and gpu_holders is false'),
    ({'exclude': [0]}, 'exclude[0]: 0 is out of range; give a number from 1 to 4194304 (a PID)'),
    ({'gpu_memory_max_mib': -1}, 'gpu_memory_max_mib: -1 is out of range'),
    ({'gpu_wait_timeout': -1}, 'gpu_wait_timeout: -1.0 is out of range'),
    ({'nvidia_smi_path': '/nonexistent/nvidia-smi'}, "nvidia_smi_path: '/nonexistent/nvidia-smi' does not exist"),
    ({'vmid': 1000000000}, 'vmid: 1000000000 is not a Proxmox container id'),
])
def test_process_reclaim_bad_values(args, message, run_module):
    result = run_module(process_reclaim, args)
    assert result['failed'] is True and message in result['msg']


def test_gpu_wait_without_nvidia_smi_fails_clearly(run_module, monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    result = run_module(process_reclaim, {'match': [r'^no-such-process-\d+$'], 'gpu_memory_max_mib': 0})
    assert result['failed'] is True and 'nvidia-smi was not found' in result['msg']


def test_broken_driver_fails_a_gpu_wait_with_the_cause(run_module, tmp_path, monkeypatch):
    standin = REPO / 'lab' / 'standins' / 'nvidia_smi' / 'nvidia-smi'
    if not standin.exists():
        pytest.skip('the stand-in nvidia-smi is missing')
    conf = tmp_path / 'standin.conf'
    conf.write_text('mode=driver-not-loaded\n')
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_CONF', str(conf))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_STATE', str(tmp_path / 'state.json'))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_DATA', str(REPO / 'lab' / 'fixtures' / 'nvidia-smi'))
    result = run_module(process_reclaim, {'match': [r'^no-such-process-\d+$'], 'gpu_memory_max_mib': 0,
                                          'nvidia_smi_path': str(standin)})
    assert result['failed'] is True
    assert 'nvidia-smi does not work' in result['msg'] and 'NVIDIA driver not loaded' in result['msg']


def test_a_hanging_nvidia_smi_fails_a_gpu_wait_in_bounded_time(run_module, tmp_path, monkeypatch):
    standin = REPO / 'lab' / 'standins' / 'nvidia_smi' / 'nvidia-smi'
    conf = tmp_path / 'standin.conf'
    conf.write_text('mode=hang\n')
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_CONF', str(conf))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_STATE', str(tmp_path / 'state.json'))
    began = time.monotonic()
    result = run_module(process_reclaim, {'match': [r'^no-such-process-\d+$'], 'gpu_memory_max_mib': 0,
                                          'nvidia_smi_path': str(standin), 'command_timeout': 1})
    assert time.monotonic() - began < 15
    assert result['failed'] is True
    assert 'did not finish within its timeout of 1.0 seconds' in result['msg'] and str(standin) in result['msg']
    assert not result.get('killed')


class FakeScope(object):
    """Container 101 as ContainerScope describes it: these host PIDs belong to it."""

    vmid = 101

    def __init__(self, members):
        self.members = set(members)

    def contains(self, pid):
        return pid in self.members


PARAMS = {'gpu_holders': False, 'zombies': True, 'exclude': []}
LEFTOVER_PATTERNS = [re.compile(r'^sglang::'), re.compile(r'(^|\s)-m\s+sglang\.launch_server(\s|$)')]

# the same server program inside the container (host PIDs 5001-5003) and on the host or in
# another container (6001-6002); a zombie of each
PROCESSES = dict((p.pid, p) for p in [
    INIT,
    proc(5001, ['python3', '-m', 'sglang.launch_server', '--port', '30000'], nspid=[5001, 80]),
    proc(5002, ['sglang::scheduler_TP0'], ppid=5001, nspid=[5002, 81]),
    proc(5003, ['sglang::detokenizer'], ppid=1, state='Z', nspid=[5003, 82]),
    proc(6001, ['python3', '-m', 'sglang.launch_server', '--port', '30001']),
    proc(6002, ['sglang::scheduler_TP0'], ppid=6001),
    proc(6003, ['sglang::detokenizer'], ppid=6001, state='Z'),
])


def test_process_reclaim_with_vmid_selects_only_the_containers_processes():
    selection = process_reclaim.Selection(PROCESSES, LEFTOVER_PATTERNS, PARAMS, reclaim.Protection(own_pid=99999),
                                          FakeScope([5001, 5002, 5003]), None)
    assert [p.pid for p in selection.targets] == [5001, 5002]
    assert [z['pid'] for z in selection.zombies] == [5003]
    assert selection.protected == [] and selection.excluded == []


def test_process_reclaim_without_vmid_selects_every_match():
    # the counterpart: the same processes without a container scope are all selected
    selection = process_reclaim.Selection(PROCESSES, LEFTOVER_PATTERNS, PARAMS, reclaim.Protection(own_pid=99999),
                                          None, None)
    assert [p.pid for p in selection.targets] == [5001, 5002, 6001, 6002]
    assert [z['pid'] for z in selection.zombies] == [5003, 6003]


def test_process_reclaim_with_vmid_leaves_a_zombies_parent_outside_the_container_alone():
    zombie = proc(5004, ['sglang::detokenizer'], ppid=6001, state='Z')
    processes = dict(PROCESSES)
    processes[zombie.pid] = zombie
    selection = process_reclaim.Selection(processes, LEFTOVER_PATTERNS, PARAMS, reclaim.Protection(own_pid=99999),
                                          FakeScope([5001, 5002, 5003, 5004]), None)
    plan = [z for z in selection.zombies if z['pid'] == 5004][0]
    assert plan['action'] == 'none' and plan['reason'] == 'the parent is outside container 101'


def test_process_reclaim_redacts_matched_command_lines(monkeypatch, signals, run_module):
    processes = {SERVER.pid: SERVER}
    monkeypatch.setattr(procfs, 'snapshot', lambda proc_root=procfs.PROC: processes)
    result = run_module(process_reclaim, {'_ansible_check_mode': True})
    assert [m['pid'] for m in result['matched']] == [SERVER.pid]
    assert SECRET not in json.dumps(result)
    assert signals == {'terminate': [], 'kill': []}
