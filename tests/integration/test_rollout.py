"""extract.yml on the local fleet (2 hypervisors, 3 containers), through ansible-runner,
asserting on its stats and events. The tests run in order and build on each other:

1. cold: the containers are destroyed and made again bare (lab/fleet/up.sh), then one
   run brings all three to healthy servers;
2. the second run, from the installed collection by FQCN with every role
   (extract_force), changes nothing; the third, plain, sees every host converged
   and runs no role;
3. injected faults, all at once: a port holder in ct1 that only the hypervisor can kill,
   40 undrained dumps and a stale NCCL segment in ct1, a GPU holder in ct2, ct3 stopped;
   one run heals all of it, and the dumps are all still there, moved aside;
4. an unreachable hypervisor (and its container): with extract_max_fail_percentage the
   rest finish; a failed canary batch (extract_serial 1, percentage 0) stops the rollout;
5. a server that crashes at start fails its host with the cause; the next run heals it;
6. bad values (tp-size 3 on 2 GPUs, port 70000, a model dir missing a shard) fail in
   preflight with nothing changed;
7. with sglang_server_undrained_dumps=stop, undrained dumps stop the play, untouched;
8. playbooks/stop.yml leaves every port free and every GPU at 0 MiB.
"""

import os
import re
import shlex
import subprocess
import sys
import textwrap
import time

import ansible_runner
import pytest
import yaml

from collection_helpers import REPO, VENV_BIN, installed, run  # noqa: F401  pylint: disable=unused-import
from fleet_helpers import FLEET, lab_ssh

DEMO_INVENTORY = os.path.join(REPO, 'inventory', 'demo')
NODES = {'pve1': '10.200.0.2', 'pve2': '10.200.0.3'}
CTS = {'ct1': ('10.200.0.101', 'pve1', 101), 'ct2': ('10.200.0.102', 'pve1', 102),
       'ct3': ('10.200.0.103', 'pve2', 103)}
PORT = 8000
DUMP_DIR = '/dev/shm/sglang_hs'
HOLDER_PIDFILE = '/run/eagle3-rollout-port-holder.pid'
# exit 0 when the pid no longer runs: gone, or a zombie its (re)parent has not reaped yet
GONE = "test ! -e /proc/%d || grep -q '^State:[[:space:]]*Z' /proc/%d/status"
# run in the lab-ctl network namespace: prints the HTTP status of a GET
# (no proxy from the environment: the fleet is reached directly)
HEALTH_GET = ('import sys, urllib.request as u; '
              'print(u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=10).status)')


pytestmark = FLEET + [pytest.mark.whole_fleet]


ssh = lab_ssh


def ct(name, command, **kwargs):
    return ssh(CTS[name][0], command, **kwargs)


class Run(object):
    """One ansible-runner run of a playbook and what it reported."""

    def __init__(self, runner):
        self.runner = runner
        self.rc = runner.rc
        self.stats = runner.stats or {}
        self.events = list(runner.events)
        self.output = runner.stdout.read()

    def changed_hosts(self):
        return {host: n for host, n in self.stats.get('changed', {}).items() if n}

    def failed_hosts(self):
        return sorted(set(self.stats.get('failures', {})) | set(self.stats.get('dark', {})))

    def results(self, task, host=None):
        """Results of the task of that name (ok, changed or failed), per host."""
        found = {}
        for event in self.events:
            data = event.get('event_data', {})
            if event.get('event') in ('runner_on_ok', 'runner_on_failed') and data.get('task') == task \
                    and (host is None or data.get('host') == host):
                found[data['host']] = data['res']
        return found

    def results_failed(self, host):
        """Results of every task that failed on host."""
        return [event['event_data']['res'] for event in self.events
                if event.get('event') == 'runner_on_failed' and event.get('event_data', {}).get('host') == host]

    def roles_run(self, host):
        """The roles that ran a task on host, in order."""
        roles = []
        for event in self.events:
            data = event.get('event_data', {})
            if event.get('event') == 'runner_on_start' and data.get('host') == host and data.get('role') \
                    and data['role'].split('.')[-1] not in roles:
                roles.append(data['role'].split('.')[-1])
        return roles

    def table(self):
        """The rows of the table the last play prints, and the lines after them."""
        res = self.results('Print one line per extraction server, then each failure and its cause')['localhost']
        lines = res['msg'].splitlines()
        # cells are separated by two spaces or more ("2 x NVIDIA H200" is one cell)
        rows = {line.split()[0]: re.split(r'\s{2,}', line) for line in lines[1:] if re.match(r'ct\d+ ', line)}
        return rows, [line for line in lines if line.startswith('FAILED') or 'servers healthy' in line]


def extract(tmp_path, name, playbook='extract.yml', inventories=(), extravars=None, collections=None, tags=None):
    """Run a playbook of the collection, from the checkout or (collections) the installed copy."""
    envvars = {'ANSIBLE_HOST_KEY_CHECKING': 'false', 'ANSIBLE_CONFIG': os.path.join(REPO, 'ansible.cfg')}
    # ansible-runner finds ansible-playbook on this process's PATH: the controller venv's
    if VENV_BIN not in os.environ['PATH'].split(os.pathsep):
        os.environ['PATH'] = VENV_BIN + os.pathsep + os.environ['PATH']
    if collections:
        envvars['ANSIBLE_COLLECTIONS_PATH'] = str(collections)
    private = tmp_path / name
    private.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=REPO, playbook=playbook,
        inventory=[DEMO_INVENTORY] + [str(path) for path in inventories], extravars=extravars or {},
        envvars=envvars, quiet=True, tags=tags)
    result = Run(runner)
    (private / 'output.log').write_text(result.output)
    return result


def inventory(tmp_path, name, data):
    path = tmp_path / (name + '.yml')
    path.write_text(yaml.safe_dump(data))
    return path


def assert_healthy(result, hosts=tuple(CTS), run=None):
    """Healthy in the table (run: applied or unchanged) and seen from outside."""
    rows, summary = result.table()
    for host in hosts:
        address, node, vmid = CTS[host]
        assert rows[host][1:4] == ['%d@%s' % (vmid, node), '2 x NVIDIA H200', '580.159.04'], rows[host]
        assert rows[host][5] == 'healthy', (host, rows[host], summary)
        assert run is None or rows[host][6] == run, (host, rows[host])
        assert 'http://%s:%d' % (address, PORT) in rows[host]
        # from outside the container: /health answers 200
        answer = subprocess.run(['ip', 'netns', 'exec', 'lab-ctl', sys.executable, '-c', HEALTH_GET,
                                 'http://%s:%d/health' % (address, PORT)],
                                capture_output=True, text=True, check=False, timeout=30)
        assert answer.stdout.strip() == '200', (host, answer.stdout, answer.stderr)
        assert ct(host, 'systemctl is-active sglang-extraction.service').stdout.strip() == 'active'


@pytest.fixture(scope='module')
def state():
    """What the tests hand on to each other."""
    return {}


def test_cold_run_brings_every_server_up(tmp_path, state):
    # bare containers: destroyed, then made again from the template by the fleet
    for name, (address, node, vmid) in CTS.items():
        ssh(NODES[node], 'pct stop %d >/dev/null 2>&1; pct destroy %d --purge >/dev/null 2>&1; true' % (vmid, vmid))
    # those three only: ct4 is test_pct_fleet.py's, which may run beside this test (lab/run-all.sh)
    up = run(['bash', os.path.join(REPO, 'lab', 'fleet', 'up.sh')] + sorted(CTS))
    assert up.returncode == 0, up.stderr
    assert ct('ct1', 'test -e /etc/systemd/system/sglang-extraction.service', check=False).returncode == 1

    result = extract(tmp_path, 'cold')

    assert result.rc == 0, result.output[-5000:]
    assert result.failed_hosts() == []
    assert set(result.changed_hosts()) == set(CTS)
    assert_healthy(result)
    # the first run gave each container its /dev/shm (a restart, allowed by the demo inventory)
    for host, (address, node, vmid) in CTS.items():
        assert 'dev/shm' in ssh(NODES[node], 'pct config %d' % vmid).stdout
    state['cold'] = True


def test_no_process_shows_the_api_key(state):
    """Every command line in every container, as `ps` shows them to any user: the servers run
    with only `--config <file>`, and the key is in none of them."""
    assert state.get('cold'), 'needs the cold run'
    key = yaml.safe_load(open(os.path.join(DEMO_INVENTORY, 'group_vars', 'extraction_servers.yml')))[
        'sglang_server_api_key']
    for name in CTS:
        lines = ct(name, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done").stdout
        servers = [line for line in lines.splitlines() if '--config' in line and 'launch_server' in line]
        assert servers, '%s: no server runs with --config:\n%s' % (name, lines)
        assert key not in lines, '%s: the API key is on a command line' % name
        mode = ct(name, 'stat -c %a /etc/sglang/sglang-extraction.yaml /var/log/sglang/sglang-extraction.log')
        assert mode.stdout.split() == ['600', '600'], mode.stdout


def test_second_run_from_the_installed_collection_changes_nothing(tmp_path, state, installed):
    assert state.get('cold'), 'needs the cold run'
    result = extract(tmp_path, 'again', playbook='eagle3.extraction.extract', collections=installed,
                     extravars={'extract_force': True})

    assert result.rc == 0, result.output[-5000:]
    assert result.failed_hosts() == []
    assert result.changed_hosts() == {}
    assert_healthy(result, run='applied')
    for host in CTS:
        # sglang_server's first task is the read of its unit's state, which gpu_check goes by
        assert result.roles_run(host) == ['proxmox_container', 'sglang_server', 'gpu_check', 'ml_env',
                                          'sglang_patch']


def test_converged_hosts_are_left_alone(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    result = extract(tmp_path, 'converged')

    assert result.rc == 0, result.output[-5000:]
    assert result.changed_hosts() == {}
    assert_healthy(result, run='unchanged')
    for host in CTS:
        assert result.roles_run(host) == []

    # a hand edit of ct2's unit is drift: the next run applies every role there again
    ct('ct2', 'echo "# edited by hand" >> /etc/systemd/system/sglang-extraction.service')
    drifted = extract(tmp_path, 'drifted')
    assert drifted.rc == 0, drifted.output[-5000:]
    assert set(drifted.changed_hosts()) == {'ct2'}
    assert_healthy(drifted, hosts=('ct1', 'ct3'), run='unchanged')
    assert_healthy(drifted, hosts=('ct2',), run='applied')
    assert ct('ct2', 'grep -c "edited by hand" /etc/systemd/system/sglang-extraction.service',
              check=False).stdout.strip() == '0'


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
    ''' % (PORT, HOLDER_PIDFILE))


def start_hidden_port_holder():
    """On pve1, in ct1's network namespace only: invisible and unkillable from inside ct1."""
    init = ssh(NODES['pve1'], "pct status 101 --verbose | awk '$1 == \"pid:\" {print $2}'").stdout.strip()
    assert init.isdigit()
    ssh(NODES['pve1'], 'rm -f %s; setsid nsenter --net=/proc/%s/ns/net -- /usr/bin/python3 -c %s '
                       '</dev/null >/dev/null 2>&1 &' % (HOLDER_PIDFILE, init, shlex.quote(HOLDER)))
    for dummy in range(50):
        pid = ssh(NODES['pve1'], 'cat %s 2>/dev/null' % HOLDER_PIDFILE, check=False).stdout.strip()
        if pid:
            return int(pid)
        time.sleep(0.1)
    raise AssertionError('the port holder did not start on pve1')


def test_injected_faults_are_all_healed_in_one_run(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    ct('ct1', 'systemctl stop sglang-extraction.service')
    ct('ct2', 'systemctl stop sglang-extraction.service')
    # ct1: a port holder only pve1 can kill, 40 undrained dumps, a stale NCCL segment
    holder = start_hidden_port_holder()
    assert ct('ct1', 'ss -H -ltnp sport = :%d' % PORT).stdout.count('pid=') == 0
    ct('ct1', 'mkdir -p %s && for i in $(seq 1 40); do head -c 8192 /dev/urandom > %s/seq-$i.pt; done; '
              'head -c 4096 /dev/zero > /dev/shm/nccl-rollout-stale' % (DUMP_DIR, DUMP_DIR))
    dumps = ct('ct1', 'cd %s && sha256sum seq-*.pt | sort' % DUMP_DIR).stdout
    assert dumps.count('\n') == 40
    # ct2: a process holding 4096 MiB on both GPUs
    ct('ct2', 'setsid nvidia-smi-standin hold --gpu all --mib 4096 </dev/null >/run/rollout-gpu-holder.log 2>&1 &'
              ' sleep 1; pgrep -f "nvidia-smi-standin hold" > /run/rollout-gpu-holder.pid')
    gpu_holder = int(ct('ct2', 'cat /run/rollout-gpu-holder.pid').stdout.split()[0])
    used = ct('ct2', 'nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits').stdout.split()
    assert [int(mib) >= 4096 for mib in used] == [True, True], used
    # ct3: stopped
    ssh(NODES['pve2'], 'pct stop 103')

    try:
        result = extract(tmp_path, 'faults')
    finally:
        ssh(NODES['pve1'], 'kill -9 %d 2>/dev/null; rm -f %s' % (holder, HOLDER_PIDFILE), check=False)

    assert result.rc == 0, result.output[-6000:]
    assert result.failed_hosts() == []
    assert_healthy(result)
    # ct1: escalated to pve1, which killed exactly the holder
    escalated = result.results('Kill what listens on the port from the hypervisor (pct, vmid)', 'ct1')['ct1']
    assert escalated['changed'] is True and escalated['vmid'] == 101
    assert [k['pid'] for k in escalated['killed']] == [holder, holder]
    assert ssh(NODES['pve1'], GONE % (holder, holder), check=False).returncode == 0
    # ct1: the stale segment removed; the dumps moved aside, all 40, unchanged
    assert ct('ct1', 'test -e /dev/shm/nccl-rollout-stale', check=False).returncode == 1
    aside = ct('ct1', 'ls -d %s.undrained-*' % DUMP_DIR).stdout.split()
    assert len(aside) == 1
    assert ct('ct1', 'cd %s && sha256sum seq-*.pt | sort' % aside[0]).stdout == dumps
    # the new server's capture keeps its own files there (CAPTURE_STATS.json, its reserves): no dump
    assert ct('ct1', "find %s -name '*.pt' | wc -l" % DUMP_DIR).stdout.strip() == '0'
    # ct2: the GPU holder killed by gpu_check's reclaim; its dump dir held only the capture's
    # own files, no dump, so nothing was set aside
    assert ct('ct2', GONE % (gpu_holder, gpu_holder), check=False).returncode == 0
    assert ct('ct2', 'ls -d %s.undrained-* 2>/dev/null | wc -l' % DUMP_DIR, check=False).stdout.strip() == '0'
    # ct3: started again by proxmox_container
    assert ssh(NODES['pve2'], 'pct status 103').stdout.strip() == 'status: running'


def unreachable_inventory(tmp_path):
    return inventory(tmp_path, 'unreachable', {'all': {'children': {
        'proxmox_hypervisors': {'hosts': {'pve3': {'ansible_host': '10.200.0.9'}}},
        'extraction_servers': {'hosts': {'ct4': {'ansible_host': '10.200.0.104', 'proxmox_container_node': 'pve3',
                                                 'proxmox_container_vmid': 104}}}}}})


def test_unreachable_hypervisor_fails_only_its_container(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    result = extract(tmp_path, 'unreachable', inventories=[unreachable_inventory(tmp_path)],
                     extravars={'extract_max_fail_percentage': 30})

    assert result.rc != 0
    assert result.failed_hosts() == ['ct4']
    assert result.changed_hosts() == {}
    assert_healthy(result)
    rows, summary = result.table()
    assert rows['ct4'][5] == 'FAILED'
    assert summary[0] == '3 of 4 servers healthy'
    assert summary[1].startswith('FAILED ct4: failed in Check that the hypervisor answered and the inventory check ran: '
                                 'hypervisor pve3 is unreachable: '), summary


def test_failed_canary_stops_the_rollout(tmp_path, state):
    """extract_serial 1 and extract_max_fail_percentage 0: ct1 (its server crashes at start)
    is the first batch; its failure ends the rollout before ct2 and ct3 start."""
    assert state.get('cold'), 'needs the cold run'
    bad = inventory(tmp_path, 'canary', {'all': {'hosts': {'ct1': {'sglang_server_env': {
        'SGLANG_STANDIN_LOAD_SECONDS': '1',
        'SGLANG_STANDIN_CRASH': "ModuleNotFoundError: No module named 'sgl_kernel'"}}}}})
    result = extract(tmp_path, 'canary', inventories=[bad],
                     extravars={'extract_serial': 1, 'extract_max_fail_percentage': 0})

    assert result.rc != 0
    assert result.failed_hosts() == ['ct1']
    assert "No module named 'sgl_kernel'" in result.results('Fail this host', 'ct1')['ct1']['msg']
    for host in ('ct2', 'ct3'):
        assert result.roles_run(host) == []
    assert 'Print one line per extraction server, then each failure and its cause' not in result.output

    # the canary's inventory fixed: healthy again
    healed = extract(tmp_path, 'canary-healed')
    assert healed.rc == 0, healed.output[-5000:]
    assert_healthy(healed)


def test_server_crashing_at_start_fails_its_host_with_the_cause(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    crash = inventory(tmp_path, 'crash', {'all': {'hosts': {'ct2': {'sglang_server_env': {
        'SGLANG_STANDIN_LOAD_SECONDS': '2',
        'SGLANG_STANDIN_CRASH': "ModuleNotFoundError: No module named 'sgl_kernel'"}}}}})
    result = extract(tmp_path, 'crash', inventories=[crash])

    assert result.rc != 0
    assert result.failed_hosts() == ['ct2']
    assert_healthy(result, hosts=('ct1', 'ct3'))
    failure = result.results('Fail this host', 'ct2')['ct2']['msg']
    assert 'Wait for /health to answer 200 on every node of the server, or fail with the node and cause' in failure
    assert 'a Python module is missing from the venv' in failure
    assert "No module named 'sgl_kernel'" in failure
    rows, summary = result.table()
    assert rows['ct2'][5] == 'FAILED' and summary[0] == '2 of 3 servers healthy'

    # fixed inventory, next run: healthy again (the failed unit is cleared and restarted)
    healed = extract(tmp_path, 'healed')
    assert healed.rc == 0, healed.output[-5000:]
    assert set(healed.changed_hosts()) == {'ct2'}
    assert_healthy(healed)


def test_bad_values_fail_before_any_host_is_touched(tmp_path, state):
    """Values the inventory shows wrong fail in the first play, on the controller."""
    assert state.get('cold'), 'needs the cold run'
    units = {host: ct(host, 'sha256sum /etc/systemd/system/sglang-extraction.service').stdout for host in CTS}
    bad = inventory(tmp_path, 'bad', {'all': {'hosts': {
        'ct1': {'sglang_server_tp_size': 3},
        'ct2': {'sglang_server_port': 70000}}}})
    result = extract(tmp_path, 'bad', inventories=[bad])

    assert result.rc != 0
    assert result.failed_hosts() == ['localhost']
    assert result.changed_hosts() == {}
    failures = ' '.join(res.get('msg', '') for res in result.results_failed('localhost'))
    assert 'ct1' in failures and 'ct2' in failures and '70000' in failures, failures
    for host in CTS:
        assert result.roles_run(host) == []
        assert ct(host, 'sha256sum /etc/systemd/system/sglang-extraction.service').stdout == units[host]
        assert ct(host, 'systemctl is-active sglang-extraction.service').stdout.strip() == 'active'


def test_a_model_missing_a_shard_fails_in_preflight_with_nothing_changed(tmp_path, state):
    """What only the host shows (a shard missing on disk) fails in sglang_server's preflight,
    before ml_env and the unit."""
    assert state.get('cold'), 'needs the cold run'
    ct('ct3', 'rm -rf /srv/models/broken && cp -r /srv/models/demo /srv/models/broken && '
              'rm /srv/models/broken/model-00002-of-00002.safetensors')
    unit = ct('ct3', 'sha256sum /etc/systemd/system/sglang-extraction.service').stdout
    bad = inventory(tmp_path, 'broken', {'all': {'hosts': {'ct3': {'sglang_server_model_path': '/srv/models/broken'}}}})
    try:
        result = extract(tmp_path, 'broken', inventories=[bad])
    finally:
        ct('ct3', 'rm -rf /srv/models/broken')

    assert result.rc != 0
    assert result.failed_hosts() == ['ct3']
    assert result.changed_hosts() == {}
    assert 'missing: model-00002-of-00002.safetensors' in result.results('Fail this host', 'ct3')['ct3']['msg']
    assert result.roles_run('ct3') == ['proxmox_container', 'sglang_server', 'gpu_check']
    assert ct('ct3', 'sha256sum /etc/systemd/system/sglang-extraction.service').stdout == unit
    assert ct('ct3', 'systemctl is-active sglang-extraction.service').stdout.strip() == 'active'


# every role, each slice of its own tags on its own: the preflight runs with it, and no step
# needs a variable only another step (or another role) sets
ROLES_PLAYBOOK = """
- name: The five roles on one container
  hosts: ct1
  gather_facts: false
  roles:
    - eagle3.extraction.proxmox_container
    - role: eagle3.extraction.gpu_check
      vars:
        gpu_check_require_idle: false   # its server runs on those GPUs
    - eagle3.extraction.ml_env
    - role: eagle3.extraction.sglang_patch
      vars:
        sglang_patch_python: /root/ml-env/bin/python   # ml_env publishes it only when it runs
    - eagle3.extraction.sglang_server
"""


@pytest.mark.parametrize('tag', ['proxmox_container_run', 'gpu_check_check', 'ml_env_configure',
                                 'sglang_patch_configure', 'sglang_server_run', 'sglang_server_reclaim'])
def test_each_role_step_runs_alone_with_its_tag(tmp_path, state, tag):
    assert state.get('cold'), 'needs the cold run'
    playbook = tmp_path / 'roles.yml'
    playbook.write_text(ROLES_PLAYBOOK)
    result = extract(tmp_path, tag, playbook=str(playbook), tags=tag)

    assert result.rc == 0, result.output[-5000:]
    assert result.changed_hosts() == {}
    role = tag.rsplit('_', 1)[0]
    assert role in result.roles_run('ct1')
    preflight = [e for e in result.events if e.get('event') == 'runner_on_ok'
                 and e['event_data'].get('task_path', '').split(':')[0].endswith('/preflight.yml')
                 and e['event_data'].get('role', '').endswith(role)]
    assert preflight, 'the preflight of %s did not run with --tags %s' % (role, tag)


def test_undrained_dumps_can_stop_the_play_instead(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    ct('ct1', 'systemctl stop sglang-extraction.service')
    ct('ct1', 'mkdir -p %s && for i in 1 2 3; do head -c 1000 /dev/zero > %s/seq-$i.pt; done' % (DUMP_DIR, DUMP_DIR))
    asides = ct('ct1', 'ls -d %s.undrained-* 2>/dev/null | wc -l' % DUMP_DIR, check=False).stdout
    try:
        result = extract(tmp_path, 'dumps-stop', extravars={'sglang_server_undrained_dumps': 'stop'})
        assert result.failed_hosts() == ['ct1']
        failure = result.results('Fail this host', 'ct1')['ct1']['msg']
        assert '3 files (2.93 KB) in sglang_server_dump_dir=%s have not been drained' % DUMP_DIR in failure, failure
        # nothing moved, nothing started
        assert ct('ct1', 'ls %s/*.pt | wc -l' % DUMP_DIR).stdout.strip() == '3'
        assert ct('ct1', 'ls -d %s.undrained-* 2>/dev/null | wc -l' % DUMP_DIR, check=False).stdout == asides
        assert ct('ct1', 'systemctl is-active sglang-extraction.service', check=False).stdout.strip() == 'inactive'
    finally:
        ct('ct1', 'rm -f %s/seq-1.pt %s/seq-2.pt %s/seq-3.pt' % (DUMP_DIR, DUMP_DIR, DUMP_DIR))


def test_stop_playbook_frees_ports_and_gpus(tmp_path, state):
    assert state.get('cold'), 'needs the cold run'
    result = extract(tmp_path, 'stop', playbook='playbooks/stop.yml')

    assert result.rc == 0, result.output[-5000:]
    for host in CTS:
        assert ct(host, 'systemctl is-active sglang-extraction.service', check=False).stdout.strip() == 'inactive'
        assert ct(host, 'ss -H -ltn sport = :%d' % PORT).stdout.strip() == ''
        assert ct(host, 'pgrep -f "^sglang::"', check=False).returncode == 1
        used = ct(host, 'nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits').stdout.split()
        assert used == ['0', '0'], (host, used)
