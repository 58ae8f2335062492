"""The local fleet's own promises: a second `up` reuses what runs, and the
hypervisors are separate hosts with their own name and containers."""

import os
import re
import subprocess
import time

from fleet_helpers import FLEET

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
UP = os.path.join(REPO, 'lab', 'fleet', 'up.sh')
LAB = os.environ.get('EAGLE3_LAB', '/var/lib/eagle3-lab')

# it runs lab/fleet/up.sh itself: on the fleet's side of `make test` (pytest-fleet), never beside it in `make check`
pytestmark = FLEET


def fleet_ssh(address, *argv):
    return subprocess.run(
        ['ssh', '-n', '-i', LAB + '/ssh/id_ed25519', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no',
         '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR',
         '-o', 'ProxyCommand=ip netns exec lab-ctl nc %h %p', 'root@' + address] + list(argv),
        capture_output=True, text=True, timeout=60, check=False)


def test_up_twice_reuses_the_fleet():
    first = subprocess.run(['bash', UP], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    started = time.monotonic()
    second = subprocess.run(['bash', UP], capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    assert second.returncode == 0, second.stderr
    assert 'creating' not in second.stderr and 'starting' not in second.stderr, second.stderr
    assert elapsed < 30, 'a converged fleet should come up in seconds, took %.1f s' % elapsed


def test_each_hypervisor_is_its_own_host():
    for address, name, vmids in (('10.200.0.2', 'pve1', ['101', '102']), ('10.200.0.3', 'pve2', ['103', '104'])):
        result = fleet_ssh(address, 'hostname; pct list')
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == name
        assert lines[1].startswith('VMID ')
        assert [line.split()[0] for line in lines[2:]] == vmids
        assert all(line.split()[1] == 'running' for line in lines[2:])
        for vmid in vmids:
            assert fleet_ssh(address, 'pct', 'status', vmid).stdout == 'status: running\n', (name, vmid)


def test_containers_see_their_own_address_and_stand_in_nvidia_smi():
    """Each container: its name, systemd as PID 1 and running (or degraded), the stand-in nvidia-smi; the SSH
    session's server side and the source of its default route are its own address (what the molecule scenario
    `fleet` checked before it was folded in here)."""
    for address, name in (('10.200.0.101', 'ct1'), ('10.200.0.102', 'ct2'), ('10.200.0.103', 'ct3')):
        result = fleet_ssh(address, 'hostname; cat /proc/1/comm; nvidia-smi -L | head -n 1; '
                                    'systemctl is-system-running; echo "$SSH_CONNECTION"; ip -4 -o route get 8.8.8.8')
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[:2] == [name, 'systemd']
        assert lines[2].startswith('GPU 0: NVIDIA H200 (UUID: GPU-')
        assert lines[3] in ('running', 'degraded'), (name, lines)
        assert lines[4].split()[2] == address, (name, lines)
        assert re.search(r' src %s( |$)' % re.escape(address), lines[5]), (name, lines)


def test_up_with_names_converges_those_hosts_alone():
    """`up.sh ct1` leaves a stopped ct2 stopped (a test beside it may have stopped it on purpose), `up.sh pve1`
    converges no container, `up.sh ct2` starts it again; a name the fleet does not have is refused."""
    unknown = subprocess.run(['bash', UP, 'ct9'], capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and 'no host ct9 in fleet.conf' in unknown.stderr, unknown.stderr
    assert fleet_ssh('10.200.0.2', 'pct stop 102').returncode == 0
    try:
        for names in (['ct1'], ['pve1']):
            other = subprocess.run(['bash', UP] + names, capture_output=True, text=True, check=False)
            assert other.returncode == 0, other.stderr
            assert fleet_ssh('10.200.0.2', 'pct status 102').stdout == 'status: stopped\n', (names, other.stderr)
        named = subprocess.run(['bash', UP, 'ct2'], capture_output=True, text=True, check=False)
        assert named.returncode == 0 and 'starting container ct2' in named.stderr, named.stderr
    finally:
        subprocess.run(['bash', UP], capture_output=True, check=False)
    assert fleet_ssh('10.200.0.2', 'pct status 102').stdout == 'status: running\n'
