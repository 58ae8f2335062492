"""port_reclaim, in-process (the run_module fixture of tests/unit/conftest.py):
- bad option values fail before anything is read or signalled, with a message naming the
  option and what is allowed;
- it kills nothing when a protected process holds the port beside a killable one (killing the
  other could not free the port, and would only take a server down);
- the holders' command lines come back with their secrets redacted.

/proc is replaced by the lists the module would have read; signalling is replaced by a recorder
(the signals fixture), so a wrong selection shows up as a recorded signal instead of a killed process."""

from __future__ import annotations

import json

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
from ansible_collections.eagle3.extraction.plugins.modules import port_reclaim
from reclaim_fakes import INIT, PORT, SECRET, SERVER

INODE = 424242


@pytest.mark.parametrize('args, message', [
    ({'port': 0}, 'port: 0 is out of range; give a number from 1 to 65535'),
    ({'port': 70000}, 'port: 70000 is out of range; give a number from 1 to 65535'),
    ({'port': 8000, 'address': 'localhost'}, "address: 'localhost' is not an IPv4 or IPv6 address"),
    ({'port': 8000, 'signal_timeout': -1}, 'signal_timeout: -1.0 is out of range; give a number from 0 to 3600 seconds'),
    ({'port': 8000, 'kill_timeout': -0.5}, 'kill_timeout: -0.5 is out of range'),
    ({'port': 8000, 'vmid': 7}, 'vmid: 7 is not a Proxmox container id; give an integer from 100 to 999999999'),
])
def test_port_reclaim_bad_values(args, message, run_module):
    result = run_module(port_reclaim, args)
    assert result['failed'] is True and message in result['msg']


def test_port_reclaim_reports_every_bad_value_at_once(run_module):
    result = run_module(port_reclaim, {'port': 70000, 'address': 'x', 'vmid': 1})
    assert 'port: 70000' in result['msg'] and "address: 'x'" in result['msg'] and 'vmid: 1 ' in result['msg']


def test_vmid_off_a_hypervisor_says_where_to_run(run_module, monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    result = run_module(port_reclaim, {'port': 8000, 'vmid': 101})
    assert result['failed'] is True
    assert 'pct was not found; run the module on the Proxmox hypervisor that hosts container 101' in result['msg']


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
