"""What the reclaim modules select, in-process and without touching a real process:

- port_reclaim kills nothing when a protected process holds the port beside a killable one
  (killing the other could not free the port, and would only take a server down);
- process_reclaim with vmid selects only the processes of that container;
- command lines come back with their secrets redacted.

/proc is replaced by the lists the modules would have read; signalling is replaced by a recorder,
so a wrong selection shows up as a recorded signal instead of a killed process."""

from __future__ import annotations

import json
import re

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, reclaim
from ansible_collections.eagle3.extraction.plugins.modules import port_reclaim, process_reclaim

SECRET = 'sk-live-0123456789'
PORT = 30000
INODE = 424242


def proc(pid, cmdline, ppid=1, state='S', nspid=None, kernel_thread=False):
    name = cmdline[0].rsplit('/', 1)[-1][:15] if cmdline else 'kthread'
    return procfs.Process(pid=pid, ppid=ppid, state=state, name=name, cmdline=cmdline, starttime=1000 + pid,
                          kernel_thread=kernel_thread, uid=0, nspid=nspid or [pid])


SERVER = proc(4242, ['python3', '-m', 'sglang.launch_server', '--port', str(PORT), '--api-key', SECRET])
INIT = proc(1, ['/sbin/init'], ppid=0)


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


# ------------------------------------------------------------------ port_reclaim

@pytest.fixture
def port_held_by(monkeypatch):
    """The port's one listening socket, held by the given processes (all share its inode)."""
    def hold(*holders):
        listener = {'family': 'ipv4', 'address': port_reclaim.ipaddress.ip_address('0.0.0.0'), 'port': PORT,
                    'state': procfs.TCP_LISTEN, 'uid': 0, 'inode': INODE}
        # after a kill the port is free: the second look finds nothing
        looks = iter([[listener]] + [[]] * 10)
        monkeypatch.setattr(procfs, 'find_listeners', lambda port, address, net_dir: next(looks))
        monkeypatch.setattr(port_reclaim, 'find_holders',
                            lambda inodes, proc_root=procfs.PROC: dict((p.pid, (p, {INODE})) for p in holders))
    return hold


def test_port_reclaim_kills_nothing_when_a_protected_process_holds_the_port_too(port_held_by, signals, run_module):
    port_held_by(SERVER, INIT)
    result = run_module(port_reclaim, {'port': PORT})
    assert signals == {'terminate': [], 'kill': []}
    assert result['failed'] is True and result['changed'] is False and result['killed'] == []
    assert 'held by protected or out-of-scope process(es): 1 (/sbin/init: PID 1 (init))' in result['msg']
    assert [p['pid'] for p in result['protected']] == [1]


def test_port_reclaim_kills_nothing_in_check_mode_beside_a_protected_holder(port_held_by, signals, run_module):
    port_held_by(SERVER, INIT)
    result = run_module(port_reclaim, {'port': PORT, '_ansible_check_mode': True})
    assert signals == {'terminate': [], 'kill': []} and result['failed'] is True


def test_port_reclaim_kills_the_holder_when_no_protected_process_shares_the_port(port_held_by, signals, run_module):
    # the same port with the server alone: it is the one signalled (the two tests above can fail)
    port_held_by(SERVER)
    result = run_module(port_reclaim, {'port': PORT})
    assert signals['terminate'] == [[SERVER.pid]]
    assert 'failed' not in result and result['changed'] is True and result['port_free'] is True


def test_port_reclaim_redacts_the_holders_api_key(port_held_by, signals, run_module):
    port_held_by(SERVER, INIT)
    result = run_module(port_reclaim, {'port': PORT, '_ansible_check_mode': True})
    out = json.dumps(result)
    assert SECRET not in out
    assert '--api-key <redacted>' in [h['cmdline'] for h in result['holders'] if h['pid'] == SERVER.pid][0]


# ------------------------------------------------------------------ process_reclaim with vmid

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
