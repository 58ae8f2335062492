"""Which host processes belong to a container (plugins/module_utils/pct_scope.py).

The pct outputs are the ones /work/shared/reference/proxmox-pct.md documents
(read from pve-container's source). The ownership rule is checked on this
machine with real namespaces and a real cgroup: a PID + network namespace made
with unshare stands for the container, its first process for the container's
init.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.module_utils import pct_scope
from ansible_collections.eagle3.extraction.plugins.module_utils.pct_scope import (
    ContainerError, ContainerScope)

RUNNING_101 = """\
cpus: 8
disk: 1468006400
diskread: 104857600
diskwrite: 52428800
maxdisk: 34359738368
maxmem: 17179869184
maxswap: 536870912
mem: 123456789
name: ct1
netin: 1024
netout: 2048
pid: 43210
pressurecpufull: 0
pressurecpusome: 0
pressureiofull: 0
pressureiosome: 0
pressurememoryfull: 0
pressurememorysome: 0
status: running
swap: 0
type: lxc
uptime: 3600
vmid: 101
"""

STOPPED_102 = """\
cpus: 8
disk: 0
diskread: 0
diskwrite: 0
maxdisk: 34359738368
maxmem: 17179869184
maxswap: 536870912
mem: 0
name: ct2
netin: 0
netout: 0
status: stopped
swap: 0
type: lxc
uptime: 0
vmid: 102
"""


class FakeModule(object):
    """Finds pct and lxc-info, and answers their commands from a table (as command.run); records the argv lists."""

    def __init__(self, answers, binaries=('pct', 'lxc-info')):
        self.answers = answers
        self.binaries = binaries
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return '/usr/sbin/%s' % name if name in self.binaries else None

    def run(self, argv, timeout):
        assert timeout > 0
        self.calls.append(argv)
        return self.answers[tuple(argv)]


def container_init_pid(module, vmid):
    return pct_scope.container_init_pid(module, vmid, run=module.run)


def test_running_container_init_pid_from_pct_status_verbose():
    module = FakeModule({('/usr/sbin/pct', 'status', '101', '--verbose'): (0, RUNNING_101, '')})
    assert container_init_pid(module, 101) == 43210
    assert module.calls == [['/usr/sbin/pct', 'status', '101', '--verbose']]


def test_stopped_container_is_a_clear_error():
    module = FakeModule({('/usr/sbin/pct', 'status', '102', '--verbose'): (0, STOPPED_102, '')})
    with pytest.raises(ContainerError, match='container 102 is stopped, not running'):
        container_init_pid(module, 102)


def test_missing_container_reports_pct_error():
    err = "Configuration file 'nodes/pve1/lxc/999.conf' does not exist\n"
    module = FakeModule({('/usr/sbin/pct', 'status', '999', '--verbose'): (255, '', err)})
    with pytest.raises(ContainerError, match="rc=255.*nodes/pve1/lxc/999.conf' does not exist"):
        container_init_pid(module, 999)


def test_not_on_a_hypervisor():
    with pytest.raises(ContainerError, match='pct was not found; run the module on the Proxmox hypervisor'):
        container_init_pid(FakeModule({}, binaries=()), 101)


def test_lxc_info_fallback_when_pct_gives_no_pid():
    no_pid = '\n'.join(line for line in RUNNING_101.splitlines() if not line.startswith('pid:'))
    module = FakeModule({('/usr/sbin/pct', 'status', '101', '--verbose'): (0, no_pid, ''),
                         ('/usr/sbin/lxc-info', '-n', '101', '-p'): (0, 'PID:           43210\n', '')})
    assert container_init_pid(module, 101) == 43210


@pytest.mark.parametrize('path, member', [
    ('/lxc.payload.101/system.slice/sshd.service', True),   # LXC 4+ on cgroup v1 (this fleet)
    ('/lxc.payload.101', True),
    ('/lxc/101/ns/user.slice', True),                       # Proxmox on cgroup v2
    ('/lxc/101', True),
    ('/lxc.monitor.101', False),                            # the monitor is on the host
    ('/lxc.monitor/101', False),
    ('/lxc.payload.1010/init.scope', False),
    ('/lxc/1010/ns', False),
    ('/system.slice/pve-container@101.service', False),
])
def test_cgroup_rule(path, member):
    assert bool(pct_scope.cgroup_pattern(101).search(path)) is member


def children(pid):
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def wait_for(predicate, timeout=5):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError('timed out')
        time.sleep(0.01)


@pytest.fixture
def fake_container():
    """unshare'd PID + network namespaces with a sleeping init; yields its host PID."""
    unshare = subprocess.Popen(['unshare', '--pid', '--net', '--fork', '--kill-child', 'sleep', '120'])
    wait_for(lambda: children(unshare.pid))
    procs = []
    try:
        yield children(unshare.pid)[0], procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        unshare.kill()
        unshare.wait()


def test_membership_by_pid_namespace_network_namespace_and_nothing_else(fake_container):
    init, procs = fake_container
    inside = subprocess.Popen(['nsenter', '--target', str(init), '--pid', '--net', '--', 'sleep', '120'])
    net_only = subprocess.Popen(['nsenter', '--target', str(init), '--net', '--', 'sleep', '120'])
    outsider = subprocess.Popen(['sleep', '120'])
    procs.extend([inside, net_only, outsider])
    wait_for(lambda: children(inside.pid))           # nsenter forks into the PID namespace
    inside_pid = children(inside.pid)[0]
    wait_for(lambda: os.readlink('/proc/%d/ns/net' % net_only.pid) == os.readlink('/proc/%d/ns/net' % init))

    scope = ContainerScope(990101, init)
    assert scope.reason(init) == 'pid namespace'
    assert scope.reason(inside_pid) == 'pid namespace'
    # started from the host with only nsenter --net: the invisible port holder
    assert scope.reason(net_only.pid) == 'network namespace'
    assert scope.net_dir == '/proc/%d/net' % init
    for pid in (outsider.pid, os.getpid(), 1):
        assert scope.reason(pid) is None, pid


def test_a_container_sharing_the_host_network_claims_no_host_process():
    unshare = subprocess.Popen(['unshare', '--pid', '--fork', '--kill-child', 'sleep', '120'])
    try:
        wait_for(lambda: children(unshare.pid))
        scope = ContainerScope(990102, children(unshare.pid)[0])
        assert scope.shares_host_network and scope.netns is None
        assert scope.reason(os.getpid()) is None and scope.reason(1) is None
    finally:
        unshare.kill()
        unshare.wait()


def test_membership_by_cgroup(fake_container):
    """A real cgroup v1 named as LXC names a container's (lxc.payload.<vmid>)."""
    init, procs = fake_container
    hierarchy = '/sys/fs/cgroup/pids'
    cgroup = os.path.join(hierarchy, 'lxc.payload.990103')
    try:
        os.mkdir(cgroup)
    except OSError as exc:
        pytest.skip('cannot create a cgroup here: %s' % exc)
    member = subprocess.Popen(['sleep', '120'])
    procs.append(member)
    try:
        with open(os.path.join(cgroup, 'cgroup.procs'), 'w') as f:
            f.write(str(member.pid))
        scope = ContainerScope(990103, init)
        assert scope.reason(member.pid) == 'cgroup'
        assert ContainerScope(990104, init).reason(member.pid) is None
    finally:
        member.kill()
        member.wait()
        wait_for(lambda: not open(os.path.join(cgroup, 'cgroup.procs')).read().strip())
        os.rmdir(cgroup)


def test_vanished_init_is_a_container_error(tmp_path):
    with pytest.raises(ContainerError, match='vanished'):
        ContainerScope(101, 999999, proc_root=str(tmp_path))


FIXTURES = REPO / 'tests' / 'unit' / 'fixtures' / 'proc'
LXC = json.loads((FIXTURES / 'index.json').read_text()).get('lxc')
needs_lxc_capture = pytest.mark.skipif(LXC is None, reason='fixtures captured without --lxc')


@needs_lxc_capture
def test_captured_lxc_cgroups_follow_the_rule():
    """Real /proc/<pid>/cgroup of an LXC container on cgroup v1, seen from its hypervisor."""
    from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
    host = str(FIXTURES / 'host')
    rule = pct_scope.cgroup_pattern(LXC['vmid'])
    for role in ('init', 'sshd'):
        paths = procfs.read_cgroup(LXC['roles'][role], host)
        assert paths and all(rule.search(p) for p in paths), (role, paths)
    monitor = procfs.read_cgroup(LXC['roles']['monitor'], host)
    assert monitor and not any(rule.search(p) for p in monitor)
    other = pct_scope.cgroup_pattern(LXC['vmid'] * 10)
    assert not any(other.search(p) for p in procfs.read_cgroup(LXC['roles']['init'], host))


@needs_lxc_capture
def test_captured_lxc_init_is_protected_and_its_sshd_is_not():
    from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, reclaim
    host = str(FIXTURES / 'host')
    init = procfs.read_process(LXC['roles']['init'], host)
    sshd = procfs.read_process(LXC['roles']['sshd'], host)
    assert init.nspid == [LXC['roles']['init'], 1] and init.name == LXC['ps']['init']['comm']
    assert len(sshd.nspid) == 2 and sshd.ppid == LXC['roles']['init']
    protection = reclaim.Protection(proc_root=host, own_pid=10 ** 7)
    assert protection.reason(init) == 'the init (PID 1) of a PID namespace (a container)'
    assert protection.reason(sshd) is None
