"""The failure met when servers were run by hand, on the local fleet (lab/fleet/): a process started on
the hypervisor pve1 with only `nsenter --net=/proc/<ct1 init>/ns/net` holds a port
of container ct1 (vmid 101). Inside ct1 it cannot be seen or killed, so
port_reclaim there fails and says to use vmid; delegated to pve1 with vmid 101
it frees the port, and only that process is killed. process_reclaim with vmid
kills a leftover in the container and leaves the same title on the hypervisor.

The fleet is shared with other tests (an SGLang stand-in may serve on 8000 in
ct1), so these use a port and titles of their own.
"""

import json
import os
import subprocess
import textwrap

import pytest

from conftest import REPO, VENV_BIN

LAB = os.environ.get('EAGLE3_LAB', '/var/lib/eagle3-lab')
PVE1 = '10.200.0.2'
CT1 = '10.200.0.101'
VMID = 101
PORT = 18123
PIDFILE = '/run/eagle3-reclaim-test-holder.pid'
# exit 0 when the pid no longer runs: gone, or a zombie its (re)parent has not reaped yet
GONE = "test ! -e /proc/%d || grep -q '^State:[[:space:]]*Z' /proc/%d/status"


def fleet_up():
    try:
        out = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return any(line.split()[0] == 'lab-pve1' for line in out.splitlines() if line.strip())


pytestmark = [
    pytest.mark.fleet,
    pytest.mark.skipif(not fleet_up(), reason='the local fleet is not up (no lab-pve1 network namespace): '
                                              'run `make fleet` first'),
]


def ssh(address, command, check=True):
    argv = ['ssh', '-n', '-i', os.path.join(LAB, 'ssh', 'id_ed25519'), '-o', 'BatchMode=yes',
            '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR',
            '-o', 'ConnectTimeout=10', '-o', 'ProxyCommand=ip netns exec lab-ctl nc %h %p',
            'root@' + address, command]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60)


# ignores SIGTERM, like SGLang's leftover schedulers: the escalation has to SIGKILL it
HOLDER = textwrap.dedent('''\
    import os, signal, socket, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", %d))
    s.listen()
    with open("%s", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(3600)
    ''' % (PORT, PIDFILE))


@pytest.fixture
def hidden_holder():
    if ssh(CT1, 'ss -H -ltn sport = :%d' % PORT).stdout.strip():
        pytest.skip('something already listens on %d in ct1' % PORT)
    init = ssh(PVE1, "pct status %d --verbose | awk '$1 == \"pid:\" {print $2}'" % VMID).stdout.strip()
    assert init.isdigit(), 'ct1 (vmid %d) is not running on pve1' % VMID
    ssh(PVE1, 'rm -f %s; setsid nsenter --net=/proc/%s/ns/net -- /usr/bin/python3 -c %s '
              '</dev/null >/dev/null 2>&1 &' % (PIDFILE, init, subprocess.list2cmdline([HOLDER])))
    pid = ''
    for dummy in range(50):
        pid = ssh(PVE1, 'cat %s 2>/dev/null' % PIDFILE, check=False).stdout.strip()
        if pid:
            break
        subprocess.run(['sleep', '0.1'], check=True)
    assert pid.isdigit(), 'the holder did not start on pve1'
    try:
        yield int(pid)
    finally:
        ssh(PVE1, 'kill -9 %s 2>/dev/null; rm -f %s' % (pid, PIDFILE), check=False)


def play(tmp_path, host, tasks):
    """Run tasks on one inventory/demo host in one ansible-playbook; return their results."""
    playbook = tmp_path / ('play-%s.yml' % host)
    playbook.write_text(json.dumps([{'hosts': host, 'gather_facts': False, 'tasks': tasks}]))
    env = dict(os.environ, PATH=VENV_BIN + ':' + os.environ['PATH'], ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'),
               ANSIBLE_STDOUT_CALLBACK='ansible.posix.json')
    proc = subprocess.run(['ansible-playbook', '-i', os.path.join(REPO, 'inventory', 'demo'), str(playbook)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
                          check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError('ansible-playbook printed no JSON (rc=%s):\n%s\n%s' % (proc.returncode, proc.stdout, proc.stderr))
    return [task['hosts'][host] for task in report['plays'][0]['tasks']]


def test_holder_invisible_in_the_container_is_freed_through_vmid(hidden_holder, tmp_path):
    # from inside ct1 the port is held by a socket with no owner it can see
    assert ssh(CT1, 'ss -H -ltn sport = :%d' % PORT).stdout.strip()
    assert ssh(CT1, 'ss -H -ltnp sport = :%d' % PORT).stdout.count('pid=') == 0

    in_container, escalated, again = play(tmp_path, 'ct1', [
        {'name': 'in the container', 'eagle3.extraction.port_reclaim': {'port': PORT, 'signal_timeout': 1},
         'ignore_errors': True},
        {'name': 'from the hypervisor', 'delegate_to': "{{ proxmox_container_node }}", 'ignore_errors': True,
         'eagle3.extraction.port_reclaim': {'port': PORT, 'vmid': "{{ proxmox_container_vmid }}", 'signal_timeout': 1}},
        {'name': 'again', 'delegate_to': "{{ proxmox_container_node }}", 'ignore_errors': True,
         'eagle3.extraction.port_reclaim': {'port': PORT, 'vmid': "{{ proxmox_container_vmid }}"}},
    ])

    assert in_container.get('failed') is True
    assert 'vmid' in in_container['msg'] and 'hypervisor' in in_container['msg']
    assert in_container['killed'] == [] and in_container['listeners'][0]['owner_visible'] is False

    assert not escalated.get('failed'), escalated.get('msg')
    assert escalated['changed'] is True and escalated['vmid'] == VMID
    assert [(h['pid'], h['in_container'], h['container_pid']) for h in escalated['holders']] == \
        [(hidden_holder, 'network namespace', None)]
    assert escalated['killed'] == [{'pid': hidden_holder, 'signal': 'SIGTERM'},
                                   {'pid': hidden_holder, 'signal': 'SIGKILL'}]
    assert escalated['port_free'] is True

    assert again['changed'] is False and again['port_free'] is True
    # seen from inside the container: nothing listens any more; on pve1 the holder is gone
    assert ssh(CT1, 'ss -H -ltn sport = :%d' % PORT).stdout.strip() == ''
    assert ssh(PVE1, GONE % (hidden_holder, hidden_holder), check=False).returncode == 0
    # and the container itself still runs
    assert ssh(PVE1, 'pct status %d' % VMID).stdout.strip() == 'status: running'


def test_missing_container_is_a_clear_error(tmp_path):
    result = play(tmp_path, 'pve1', [{'eagle3.extraction.port_reclaim': {'port': PORT, 'vmid': 199},
                                      'ignore_errors': True}])[0]
    assert result['failed'] is True
    assert "pct status 199 --verbose` failed" in result['msg'] and 'does not exist' in result['msg']


def test_stopped_container_is_a_clear_error(tmp_path):
    """ct2 stopped for the case, then started again (lab/fleet/up.sh ct2): `make pytest-fleet` runs before the
    scenarios and beside nothing that uses ct2 (lab/run-all.sh)."""
    ssh(PVE1, 'pct stop 102')
    try:
        result = play(tmp_path, 'pve1', [{'eagle3.extraction.process_reclaim': {'vmid': 102},
                                          'ignore_errors': True}])[0]
    finally:
        subprocess.run(['bash', os.path.join(REPO, 'lab', 'fleet', 'up.sh'), 'ct2'], capture_output=True, check=False,
                       timeout=300)
    assert result['failed'] is True and 'container 102 is stopped' in result['msg']
    assert ssh(PVE1, 'pct status 102').stdout.strip() == 'status: running'


def test_process_reclaim_with_vmid_touches_only_the_container(tmp_path):
    """The same title in ct1 and on its hypervisor: only ct1's is killed."""
    title = 'sglang::scheduler_TP7'
    token = '6004242'  # sleep's argument: tells the test's processes from anyone else's
    start = "setsid bash -c 'exec -a %s sleep %s' </dev/null >/dev/null 2>&1 & echo $!" % (title, token)
    in_ct = int(ssh(CT1, start).stdout.strip())
    on_pve1 = int(ssh(PVE1, start).stdout.strip())
    try:
        result, again = play(tmp_path, 'ct1', [
            {'delegate_to': "{{ proxmox_container_node }}", 'ignore_errors': True,
             'eagle3.extraction.process_reclaim': {'vmid': "{{ proxmox_container_vmid }}", 'signal_timeout': 1,
                                                   'match': ['^%s %s$' % (title, token)]}},
            {'delegate_to': "{{ proxmox_container_node }}", 'ignore_errors': True,
             'eagle3.extraction.process_reclaim': {'vmid': "{{ proxmox_container_vmid }}", 'signal_timeout': 1,
                                                   'match': ['^%s %s$' % (title, token)]}},
        ])
        assert not result.get('failed'), result.get('msg')
        # in_ct is ct1's own PID; the module reports host PIDs, and NSpid maps them
        assert [m['nspid'][-1] for m in result['matched']] == [in_ct]
        assert [k['signal'] for k in result['killed']] == ['SIGTERM']
        assert again['changed'] is False and again['matched'] == []
        assert ssh(CT1, GONE % (in_ct, in_ct), check=False).returncode == 0
        # the same title outside the container, on the hypervisor, is untouched
        assert ssh(PVE1, 'kill -0 %d' % on_pve1, check=False).returncode == 0
    finally:
        ssh(CT1, 'kill -9 %d 2>/dev/null' % in_ct, check=False)
        ssh(PVE1, 'kill -9 %d 2>/dev/null' % on_pve1, check=False)
