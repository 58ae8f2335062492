"""plugins/module_utils/procfs.py against /proc files captured from real processes.

tests/unit/fixtures/proc/ was written by capture.py there (which says what each
process is); index.json also holds what `ps` said about each process at the same
moment, and sandbox/ss-tan.txt what `ss` said about the sockets: the parsers are
checked against those independent readers, not against numbers typed in here.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs

FIXTURES = REPO / 'tests' / 'unit' / 'fixtures' / 'proc'
SANDBOX = FIXTURES / 'sandbox'
HOST = FIXTURES / 'host'
INDEX = json.loads((FIXTURES / 'index.json').read_text())
ROLES = INDEX['sandbox']['roles']
PS = INDEX['sandbox']['ps']


def ss_sockets():
    """(state, address, port) of every socket ss listed, normalised."""
    states = {'LISTEN': procfs.TCP_LISTEN, 'ESTAB': '01'}
    out = set()
    for line in (SANDBOX / 'ss-tan.txt').read_text().splitlines():
        fields = line.split()
        address, _sep, port = fields[3].rpartition(':')
        address = address.strip('[]')
        out.add((states[fields[0]], ipaddress.ip_address('::' if address == '*' else address), int(port)))
    return out


def test_tcp_tables_parse_to_what_ss_saw():
    sockets = procfs.read_tcp_sockets(str(SANDBOX / 'net'))
    assert set((s['state'], s['address'], s['port']) for s in sockets) == ss_sockets()


def test_ipv6_addresses_decode_in_host_byte_order():
    assert INDEX['byteorder'] == sys.byteorder
    text = (SANDBOX / 'net' / 'tcp6').read_text()
    sockets = procfs.parse_net_tcp(text, 'ipv6')
    assert ipaddress.ip_address('::1') in [s['address'] for s in sockets]
    mapped = [s['address'] for s in sockets if s['address'].ipv4_mapped is not None]
    assert mapped and all(str(a.ipv4_mapped) == '127.0.0.1' for a in mapped)


def listening(port, address=None):
    found = procfs.find_listeners(port, None if address is None else ipaddress.ip_address(address),
                                  str(SANDBOX / 'net'))
    return sorted(str(s['address']) for s in found)


@pytest.mark.parametrize('port, address, expected', [
    (8000, None, ['127.0.0.1', '::1']),
    (8000, '127.0.0.1', ['127.0.0.1']),
    (8000, '::1', ['::1']),
    (8000, '0.0.0.0', ['127.0.0.1']),
    (8000, '::', ['127.0.0.1', '::1']),
    (8000, '10.0.0.5', []),
    (30000, '10.0.0.5', ['0.0.0.0']),       # 0.0.0.0 catches every IPv4 address
    (30000, '::1', []),
    (30001, '127.0.0.1', ['::']),           # '::' is dual-stack: it catches IPv4 too
    (30001, '::ffff:127.0.0.1', ['::']),
    (57910, None, []),                      # only an established connection's port: not a listener
])
def test_listener_matching_by_address(port, address, expected):
    assert listening(port, address) == expected


def fd_tree(tmp_path, root=SANDBOX):
    """A proc root whose <pid>/fd holds real symlinks made from the captured fd.txt."""
    for pid_dir in root.iterdir():
        if not pid_dir.name.isdigit():
            continue
        fd_dir = tmp_path / pid_dir.name / 'fd'
        fd_dir.mkdir(parents=True)
        for line in (pid_dir / 'fd.txt').read_text().splitlines():
            fd, _sep, target = line.partition(' -> ')
            os.symlink(target, str(fd_dir / fd))
    return str(tmp_path)


def test_socket_holders_include_the_forked_child(tmp_path):
    root = fd_tree(tmp_path)
    inode = [s['inode'] for s in procfs.read_tcp_sockets(str(SANDBOX / 'net'))
             if s['port'] == 8000 and s['family'] == 'ipv4'][0]
    holders = sorted(pid for pid in procfs.list_pids(root) if inode in procfs.socket_inodes(pid, root))
    assert holders == sorted([ROLES['listener_v4'], ROLES['listener_v4_child']])


def test_socket_inode_from_fd_link():
    assert procfs.socket_inode('socket:[39615]') == 39615
    assert procfs.socket_inode('pipe:[39615]') is None
    assert procfs.socket_inode('/dev/null') is None


@pytest.mark.parametrize('role', sorted(ROLES))
def test_process_reads_like_ps(role):
    proc = procfs.read_process(ROLES[role], str(SANDBOX))
    ps = PS[role]
    assert (proc.pid, proc.ppid, proc.uid, proc.state) == (ps['pid'], ps['ppid'], ps['uid'], ps['stat'][0])
    assert proc.name == ps['comm']
    assert proc.kernel_thread is False
    if proc.zombie:
        # a zombie keeps only its name: ps shows "[name] <defunct>"
        assert proc.cmdline == [] and ps['args'] == proc.command + ' <defunct>'
    else:
        assert proc.command == ps['args']


def test_setproctitle_style_title():
    proc = procfs.read_process(ROLES['sglang_scheduler'], str(SANDBOX))
    assert proc.cmdline == ['sglang::scheduler_TP0']
    assert proc.name == 'sglang::schedul'       # comm: 15 characters
    exec_a = procfs.read_process(ROLES['exec_a'], str(SANDBOX))
    assert exec_a.cmdline == ['sglang::detokenizer', '1000'] and exec_a.name == 'sleep'


def test_comm_with_spaces_and_parentheses():
    pid = ROLES['weird_comm']
    stat = procfs.parse_stat((SANDBOX / str(pid) / 'stat').read_text())
    assert stat['comm'] == 'a) (b c' and stat['state'] == 'S' and stat['ppid'] == PS['weird_comm']['ppid']


def test_kernel_thread_flag():
    kthreadd = procfs.read_process(2, str(HOST))
    assert kthreadd.kernel_thread is True and kthreadd.cmdline == [] and kthreadd.command == '[kthreadd]'


def test_nspid_of_a_process_in_a_nested_pid_namespace():
    host_roles = INDEX['host']['roles']
    init = procfs.read_process(host_roles['sandbox_init'], str(HOST))
    assert init.nspid == [host_roles['sandbox_init'], 1]
    child = procfs.read_process(host_roles['listener_v4_seen_from_host'], str(HOST))
    assert child.nspid[0] == host_roles['listener_v4_seen_from_host'] and child.nspid[-1] in ROLES.values()


def test_cgroup_v1_lines():
    paths = procfs.read_cgroup(ROLES['listener_v4'], str(SANDBOX))
    lines = (SANDBOX / str(ROLES['listener_v4']) / 'cgroup').read_text().splitlines()
    assert len(paths) == len(lines) and all(p.startswith('/') for p in paths)


def test_vanished_process_reads_as_none(tmp_path):
    assert procfs.read_process(999999, str(tmp_path)) is None
    assert procfs.fd_targets(999999, str(tmp_path)) == []


def test_liveness_zombie_and_pid_reuse_on_live_processes():
    child = subprocess.Popen(['sleep', '60'])
    try:
        proc = procfs.read_process(child.pid)
        assert procfs.is_alive(child.pid, proc.starttime)
        # another start time means another process that got the same pid
        assert not procfs.is_alive(child.pid, proc.starttime + 1)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while procfs.read_process(child.pid).state != 'Z' and time.monotonic() < deadline:
            time.sleep(0.01)
        # not reaped yet: a zombie is gone for reclaim purposes but still exists
        assert not procfs.is_alive(child.pid, proc.starttime)
        assert procfs.exists(child.pid, proc.starttime)
    finally:
        child.kill()
        child.wait()
    assert not procfs.exists(child.pid, proc.starttime)


def test_ancestors_of_this_process():
    chain = procfs.ancestors(os.getpid())
    assert chain[0] == os.getppid()
    assert chain[-1] in (1, 0) or procfs.read_status(chain[-1])['ppid'] == 0
