"""The extraction job on the local fleet (3 containers), through ansible-runner: 2,000
samples, every fault once, and the output proven sample by sample.

One scenario, faults batched so that few playbook runs are needed:

1. extract.yml starts the job (shards 0, 1, 2 on ct1, ct2, ct3), each server on another address:
   ct1 on 0.0.0.0, ct2 on :: and port 30000 (its sglang_server_host and _port), ct3 on its
   container's IPv6 address (the fleet is dual-stack); each server's job, the rollout table,
   the convergence cache and, at the end, stop.yml use the address the server really has.
   The stand-in servers dump through the real capture module (CPU torch, hidden size 64,
   3 captured layers), paced so that each shard takes half a minute.
2. Mid-job, at once: ct2's job is SIGKILLed; ct3's container is stopped and started
   again; ct1's /dev/shm is filled past the high watermark (the job must pause, then
   resume once it is freed), then ct1's server is SIGKILLed. systemd brings each back.
3. ct3 is taken away mid-job (container stopped), and a second extract.yml without it
   hands its shard 2 to ct2 (extraction_job_shard_indexes [1, 2]).
4. ct3 comes back while ct2 works on shard 2: its unit finishes its own copy of shard 2.
5. verify.yml proves the whole dataset, counting shard 2 once and naming ct3's copy
   once as a leftover; status.yml's table shows every shard complete.
6. stop.yml stops every server, each at its own address.

Then the outputs are copied to the controller and read with SpecForge's own loader in
the torch venv (tests/job/fleet_output_check.py): every sample exactly once and equal to
the tensors the stand-in computes, the manifests equal to the files, no partial file;
and no file finished before a fault was rewritten (inode and mtime).
"""

import json
import os
import subprocess
import tarfile
import time

import ansible_runner
import pytest
import yaml

from collection_helpers import REPO, VENV_BIN
from fleet_helpers import FLEET, lab_ssh, shard_statuses

LAB = os.environ.get('EAGLE3_LAB', '/var/lib/eagle3-lab')
DEMO_INVENTORY = os.path.join(REPO, 'inventory', 'demo')
TORCH_PYTHON = os.path.join(REPO, '.venv-torch', 'bin', 'python')
CTS = {'ct1': ('10.200.0.101', '10.200.0.2', 101), 'ct2': ('10.200.0.102', '10.200.0.2', 102),
       'ct3': ('10.200.0.103', '10.200.0.3', 103)}
JOB = 'fleetx'
SAMPLES = 2000
OUTPUT_ROOT = '/srv/eagle3-extraction'
JOB_DIR = '%s/%s' % (OUTPUT_ROOT, JOB)
DUMP_DIR = '/dev/shm/sglang_hs'
FILL = '/dev/shm/fleetx-fill'
UNIT = 'eagle3-extraction-job@%s-shard-%%d.service' % JOB
# ct2's server listens here (its sglang_server_port; the others keep the default 8000)
MOVED_PORT = 30000
# ct3's own IPv6 address (lab/fleet/up.sh: fd00:200::<vmid>)
CT3_IP6 = 'fd00:200::103'
# where each server really listens (ss, in its container), the URL its job calls (and the convergence
# cache watches), the URL the rollout table shows; ct1 on 0.0.0.0 as the demo's group has it, ct2 on ::
# and port 30000 (:: SGLang binds IPv6-only: its job calls ::1), ct3 on
# CT3_IP6. ct2's table URL is its ansible_host's: see the report of the test below.
ADDRESSES = {
    'ct1': ('0.0.0.0:8000', 'http://127.0.0.1:8000', 'http://10.200.0.101:8000'),
    'ct2': ('[::]:%d' % MOVED_PORT, 'http://[::1]:%d' % MOVED_PORT, 'http://10.200.0.102:%d' % MOVED_PORT),
    'ct3': ('[%s]:8000' % CT3_IP6, 'http://[%s]:8000' % CT3_IP6, 'http://[%s]:8000' % CT3_IP6),
}
SERVER_PORTS = (8000, MOVED_PORT)
CONCURRENCY = 4
# the stand-in's pass takes this long: about 20 samples/s a host, half a minute a shard
FORWARD_MS = '200'


pytestmark = FLEET + [
    pytest.mark.whole_fleet,
    pytest.mark.skipif(not os.path.exists(TORCH_PYTHON), reason='the torch venv is not built: bash lab/bootstrap/torch-venv.sh'),
]


ssh = lab_ssh


def ct(name, command, **kwargs):
    return ssh(CTS[name][0], command, **kwargs)


def pct(name, action):
    _address, node, vmid = CTS[name]
    ssh(node, 'pct %s %d' % (action, vmid), timeout=180)


def statuses(name):
    """{shard index: status.json} of the host; {} when it cannot be reached."""
    return shard_statuses(lambda command: ct(name, command, check=False, timeout=20), JOB_DIR)


def wait_for(what, predicate, timeout, every=0.5):
    """``predicate()``'s first true value, asked every ``every`` s; fails naming ``what`` after ``timeout`` s."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.time() < deadline, 'waited %d s for %s' % (timeout, what)
        time.sleep(every)


def done(name, shard):
    return statuses(name).get(shard, {}).get('samples_done', 0)


def dumped(name):
    """How many dumps the host's capture has written (CAPTURE_STATS.json, each second)."""
    return json.loads(ct(name, 'cat %s/CAPTURE_STATS.json' % DUMP_DIR).stdout)['dumped']


def complete(name, shard):
    status = statuses(name).get(shard, {})
    return status.get('state') == 'complete' and status.get('samples_done') == status.get('samples_total')


def finished_files(name):
    """{path: (inode, mtime)} of every .ckpt the host holds."""
    result = ct(name, "find %s -name '*.ckpt' -printf '%%p %%i %%T@\\n'" % JOB_DIR, check=False)
    return {path: (inode, mtime) for path, inode, mtime in
            (line.split() for line in result.stdout.splitlines() if line.strip())}


def playbook(tmp_path, name, playbook_path, extravars, limit=None, inventories=()):
    private = tmp_path / name
    private.mkdir()
    if VENV_BIN not in os.environ['PATH'].split(os.pathsep):
        os.environ['PATH'] = VENV_BIN + os.pathsep + os.environ['PATH']
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=REPO, playbook=playbook_path,
        inventory=[DEMO_INVENTORY] + [str(p) for p in inventories], extravars=extravars, limit=limit,
        envvars={'ANSIBLE_CONFIG': os.path.join(REPO, 'ansible.cfg')}, quiet=True)
    output = runner.stdout.read()
    (private / 'output.log').write_text(output)
    return runner, output


def debug_msgs(runner, task):
    """{host: msg} of a debug task."""
    found = {}
    for event in runner.events:
        data = event.get('event_data', {})
        if event.get('event') == 'runner_on_ok' and data.get('task') == task:
            found.setdefault(data.get('host'), data['res'].get('msg'))
    return found


def debug_msg(runner, task):
    return next(iter(debug_msgs(runner, task).values()), None)


def address_inventory(tmp):
    """ct1 on 0.0.0.0 (as the demo's group: set here so that the test does not rest on it); ct2 on
    port 30000 and host :: (the variables alone set them: the flags refuse port and host); ct3 on
    its IPv6 address."""
    path = tmp / 'addresses.yml'
    path.write_text(yaml.safe_dump({'all': {'hosts': {'ct1': {'sglang_server_host': '0.0.0.0'},
                                                      'ct2': {'sglang_server_host': '::',
                                                              'sglang_server_port': MOVED_PORT},
                                                      'ct3': {'sglang_server_host': CT3_IP6}}}}))
    return path


def listeners(name):
    """The host:port of every listening socket on the servers' ports in the container, as ss shows them."""
    out = ct(name, 'ss -H -ltn').stdout
    return sorted(line.split()[3] for line in out.splitlines()
                  if line.strip() and line.split()[3].rsplit(':', 1)[1] in [str(p) for p in SERVER_PORTS])


def controller_health(url):
    """/health of url from the switch's netns (where the controller reaches the fleet): the status
    code, or the last error of three tries 5 s apart (a first IPv6 request may wait for the
    neighbour discovery of an address the container just got)."""
    code = ('import time, urllib.request, urllib.error\n'
            'for attempt in range(3):\n'
            ' try:\n  print(urllib.request.urlopen(%r, timeout=5).status)\n  break\n'
            ' except urllib.error.HTTPError as exc:\n  print(exc.code)\n  break\n'
            ' except OSError as exc:\n  error = exc\n  time.sleep(5)\n'
            'else:\n print(error)\n' % (url + '/health'))
    result = subprocess.run(['ip', 'netns', 'exec', 'lab-ctl', 'python3', '-c', code], capture_output=True,
                            text=True, check=False, timeout=60)
    return (result.stdout + result.stderr).strip()


def clean_slate():
    """No unit, output, config or fill of this job from an earlier run of this test."""
    for name in CTS:
        units = ' '.join(UNIT % i for i in range(3))
        ct(name, 'systemctl disable --now %s >/dev/null 2>&1; systemctl reset-failed %s >/dev/null 2>&1; '
                 'rm -rf %s /etc/eagle3-extraction/%s-* %s; true' % (units, units, JOB_DIR, JOB, FILL))


@pytest.fixture(scope='module')
def scenario(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('extraction')
    t0 = time.time()
    timings = {}
    for name in CTS:  # an earlier run may have left ct3 stopped
        if ct(name, 'true', check=False, timeout=15).returncode != 0:
            pct(name, 'start')
            wait_for('%s to answer' % name, lambda n=name: ct(n, 'true', check=False, timeout=10).returncode == 0, 120)
    clean_slate()
    # the wheelhouse ml_env installs from holds this checkout's stand-in (seconds when it does)
    subprocess.run(['bash', os.path.join(REPO, 'lab', 'fleet', 'wheelhouse.sh')], check=True,
                   capture_output=True, timeout=900)
    dataset = tmp / 'dataset.jsonl'
    subprocess.run([os.path.join(VENV_BIN, 'python'), os.path.join(REPO, 'tests', 'job', 'demo_dataset.py'),
                    '--samples', str(SAMPLES), '--out', str(dataset)], check=True, capture_output=True)
    extravars = {
        'extraction_job_dataset': str(dataset), 'extraction_job_name': JOB,
        # pinned: the handover below runs without ct3 in the play
        'extraction_job_shard_count': 3,
        'extraction_job_concurrency': CONCURRENCY, 'extraction_job_restart_sec': 1,
        # a sample answered but not dumped before a server kill is sent again after this
        'extraction_job_ack_timeout': 15,
        'sglang_server_env': {'SGLANG_STANDIN_LOAD_SECONDS': '2', 'SGLANG_STANDIN_NUM_LAYERS': '61',
                              'SGLANG_STANDIN_FORWARD_MS': FORWARD_MS},
    }
    facts = {'snapshots': {}}
    moved = address_inventory(tmp)

    # 1. the job starts on every server, each on its own address
    runner, output = playbook(tmp, 'start', 'extract.yml', extravars, inventories=[moved])
    assert runner.rc == 0, output[-3000:]
    table = debug_msg(runner, 'Print one line per extraction server, then each failure and its cause')
    rows = dict((line.split()[0], line) for line in table.splitlines() if line.startswith('ct'))
    facts['addresses'] = {name: {
        'table': table, 'row': rows.get(name, ''), 'listening': listeners(name),
        'stamp': json.loads(ct(name, 'cat /var/lib/eagle3-extraction-converged.json').stdout),
        'config': json.loads(ct(name, 'cat /etc/eagle3-extraction/%s-shard-%d.json' % (JOB, shard)).stdout),
        'from_controller': controller_health(ADDRESSES[name][2])} for name, shard in (('ct1', 0), ('ct2', 1),
                                                                                      ('ct3', 2))}
    timings['extract.yml (start)'] = time.time() - t0
    print('[%4.0f s] %s' % (timings['extract.yml (start)'], 'extract.yml (start)'), flush=True)
    for name, shard in (('ct1', 0), ('ct2', 1), ('ct3', 2)):
        wait_for('%s to be under way' % name, lambda n=name, s=shard: done(n, s) >= 40, 90)

    # 2. faults, mid-job: kill ct2's job; stop and start ct3's container; fill ct1's /dev/shm
    facts['snapshots']['ct2'] = finished_files('ct2')
    ct('ct2', 'systemctl kill -s KILL %s' % (UNIT % 1))
    facts['snapshots']['ct3'] = finished_files('ct3')
    pct('ct3', 'stop')
    pct('ct3', 'start')
    shm = statuses('ct1')[0]
    fill = int(shm['shm_total_bytes'] * 0.8) - int(shm['shm_used_bytes'])
    ct('ct1', 'fallocate -l %d %s' % (fill, FILL))
    paused = wait_for('ct1 to pause at the watermark', lambda: statuses('ct1')[0].get('paused'), 30)
    facts['paused_reason'] = paused
    # the capture's own count of dumps written: the requests in flight when the gate closed
    # are answered first, then nothing more is sent (the drain may still catch up)
    time.sleep(1.5)
    before = dumped('ct1')
    time.sleep(3)
    facts['dumped_while_paused'] = dumped('ct1') - before
    facts['shm_paused_status'] = statuses('ct1')[0]
    ct('ct1', 'rm -f %s' % FILL)
    at_resume = done('ct1', 0)
    wait_for('ct1 to resume', lambda: done('ct1', 0) >= at_resume + 20, 60)
    facts['snapshots']['ct1'] = finished_files('ct1')
    facts['server_pid_before'] = ct('ct1', 'systemctl show -p MainPID --value sglang-extraction').stdout.strip()
    ct('ct1', 'systemctl kill -s KILL sglang-extraction.service')
    timings['faults'] = time.time() - t0
    print('[%4.0f s] %s' % (timings['faults'], 'faults'), flush=True)

    # 3. ct3 resumes after its restart, then is taken away mid-job; ct2 takes its shard
    ct3_resumed = wait_for('ct3 to resume after its restart', lambda: statuses('ct3').get(2, {}).get('state') == 'running'
                           and done('ct3', 2) > len(facts['snapshots']['ct3']) + 20 and done('ct3', 2), 120)
    facts['ct3_done_when_taken'] = ct3_resumed
    facts['snapshots']['ct3'].update(finished_files('ct3'))
    pct('ct3', 'stop')
    handover = tmp / 'handover.yml'
    handover.write_text(yaml.safe_dump({'all': {'hosts': {'ct2': {'extraction_job_shard_indexes': [1, 2]}}}}))
    runner, output = playbook(tmp, 'handover', 'extract.yml', extravars, limit='ct1,ct2,pve1,localhost',
                              inventories=[moved, handover])
    assert runner.rc == 0, output[-3000:]
    timings['extract.yml (handover)'] = time.time() - t0
    print('[%4.0f s] %s' % (timings['extract.yml (handover)'], 'extract.yml (handover)'), flush=True)

    # 4. ct3 comes back while ct2 works on shard 2: its unit finishes its own copy
    pct('ct3', 'start')
    for name, shard in (('ct1', 0), ('ct2', 1), ('ct2', 2), ('ct3', 2)):
        wait_for('%s shard %d to complete' % (name, shard), lambda n=name, s=shard: complete(n, s), 240)
    facts['server_pid_after'] = ct('ct1', 'systemctl show -p MainPID --value sglang-extraction').stdout.strip()
    timings['all complete'] = time.time() - t0
    print('[%4.0f s] %s' % (timings['all complete'], 'all complete'), flush=True)

    # 5. verify and status, over the whole inventory
    runner, output = playbook(tmp, 'verify', 'playbooks/verify.yml', {'extraction_job_name': JOB})
    facts['verify'] = (runner.rc, debug_msg(runner, 'Show the totals and the leftover copies of handed-over '
                                                    'shards (not counted)'), output)
    runner, output = playbook(tmp, 'status', 'playbooks/status.yml', {'extraction_job_name': JOB})
    # the table is one block of text (msg: |-): its lines
    facts['status'] = (runner.rc, (debug_msg(runner, 'Show the table') or '').splitlines(), output)
    facts['after'] = {name: finished_files(name) for name in CTS}
    facts['leftover_dumps'] = {name: ct(name, "find %s* -name '%s-*' -o -name '*.tmp' | head" % (DUMP_DIR, JOB)
                                        ).stdout.split() for name in CTS}
    copies = tmp / 'copies'
    for name in CTS:
        target = copies / name
        target.mkdir(parents=True)
        archive = target / 'out.tar'
        with open(archive, 'wb') as f:
            address = CTS[name][0]
            argv = ['ssh', '-n', '-i', os.path.join(LAB, 'ssh', 'id_ed25519'), '-o', 'BatchMode=yes',
                    '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR',
                    '-o', 'ProxyCommand=ip netns exec lab-ctl nc %h %p', 'root@' + address,
                    'tar -C %s -cf - %s' % (OUTPUT_ROOT, JOB)]
            subprocess.run(argv, stdout=f, check=True, timeout=120)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter='data')
    shard = copies / '%s' / JOB / 'shard-%d-of-3'
    check = subprocess.run(
        [TORCH_PYTHON, os.path.join(REPO, 'tests', 'job', 'fleet_output_check.py'), '--dataset', str(dataset),
         '--hidden-size', '64', '--layers', '3',
         '--count', str(shard) % ('ct1', 0), '--count', str(shard) % ('ct2', 1), '--count', str(shard) % ('ct2', 2),
         '--leftover', str(shard) % ('ct3', 2)], capture_output=True, text=True, timeout=300, check=False)
    facts['check'] = (check.returncode, check.stdout, check.stderr)
    handed = ct('ct2', 'cat /etc/eagle3-extraction/%s-shard-2.json' % JOB).stdout
    facts['addresses']['ct2']['handover_config'] = json.loads(handed)
    # 6. stop.yml stops every server and frees the port each really had
    runner, output = playbook(tmp, 'stop', 'playbooks/stop.yml', {}, inventories=[moved])
    reports = debug_msgs(runner, 'Report what was left')
    facts['stop'] = (runner.rc, output)
    for name in CTS:
        facts['addresses'][name]['stop'] = (reports.get(name), listeners(name))
    timings['stop.yml'] = time.time() - t0
    timings['total'] = time.time() - t0
    print('[%4.0f s] %s' % (timings['total'], 'total'), flush=True)
    facts['timings'] = timings
    print('extraction fleet timings (s): %s' % {k: round(v) for k, v in timings.items()})
    return facts


def test_every_sample_exactly_once_equal_to_the_expected_tensors_read_by_specforge(scenario):
    rc, stdout, stderr = scenario['check']
    assert rc == 0, stdout + stderr
    assert json.loads(stdout)['samples'] == SAMPLES


def test_verify_proves_the_dataset_and_names_the_leftover_copy_once(scenario):
    rc, msg, output = scenario['verify']
    assert rc == 0, output[-3000:]
    assert msg.startswith('verified: %d samples exactly once' % SAMPLES), msg
    assert msg.count('is a leftover copy of shard 2') == 1 and 'ct3:' in msg, msg
    assert 'stored twice' not in output


def test_status_shows_every_shard_complete(scenario):
    rc, lines, output = scenario['status']
    assert rc == 0, output[-3000:]
    rows = [line.split() for line in lines if line.startswith('ct')]
    assert sorted((row[0], row[1], row[2]) for row in rows) == [
        ('ct1', '0/3', 'complete'), ('ct2', '1/3', 'complete'), ('ct2', '2/3', 'complete'),
        ('ct3', '2/3', 'complete')], lines
    total = [line for line in lines if line.startswith('TOTAL')][0].split()
    # ct3's leftover copy is listed too: 2,000 plus its shard
    assert total[1] == '4' and int(total[2]) > SAMPLES, lines


def test_the_job_paused_at_the_shm_watermark(scenario):
    assert scenario['paused_reason'].startswith(DUMP_DIR) and 'high watermark' in scenario['paused_reason'], \
        scenario['paused_reason']
    # nothing is sent while paused: at most the requests already in flight are dumped
    assert scenario['dumped_while_paused'] <= CONCURRENCY, scenario['shm_paused_status']


def test_the_server_kill_was_real(scenario):
    assert scenario['server_pid_before'] != scenario['server_pid_after']


def test_no_finished_file_was_rewritten(scenario):
    for name, before in scenario['snapshots'].items():
        after = scenario['after'][name]
        assert before, name
        changed = {path: (before[path], after.get(path)) for path in before if after.get(path) != before[path]}
        assert not changed, (name, list(changed.items())[:5])


def test_no_dump_or_partial_file_is_left_in_shm(scenario):
    assert scenario['leftover_dumps'] == {name: [] for name in CTS}


@pytest.mark.parametrize('name', ['ct1', 'ct2', 'ct3'], ids=['0.0.0.0', 'port 30000 on ::', 'an IPv6 address'])
def test_the_address_the_server_really_has_is_used_by_everything(scenario, name):
    """ct1 on 0.0.0.0; ct2 moved to port 30000 and :: (its sglang_server_port and _host); ct3 on its
    IPv6 address: each server listens there and only there (ss: [::] is an IPv6-only socket, * would
    be both); its job's config calls it there (ct2's handed-over shard too; that the jobs got
    through, status shows); the convergence cache watches that URL; the rollout table shows the
    URL the controller calls, which answers from the controller's side (not ct2's: its table URL is
    its IPv4 ansible_host, where an IPv6-only server does not answer); stop.yml frees that port."""
    found = scenario['addresses'][name]
    listening, client_url, table_url = ADDRESSES[name]
    assert found['listening'] == [listening], found['listening']
    assert found['config']['server_url'] == client_url, found['config']
    if name == 'ct2':
        assert found['handover_config']['server_url'] == client_url, found['handover_config']
    assert ' %s ' % table_url in found['row'], found['table']
    assert found['stamp']['watch']['url'] == client_url + '/health', found['stamp']['watch']
    if name != 'ct2':
        assert found['from_controller'] == '200', found['from_controller']
    rc, output = scenario['stop']
    assert rc == 0, output[-3000:]
    report, after = found['stop']
    port = int(listening.rsplit(':', 1)[1])
    assert after == [] and report and 'port %d free' % port in report, (report, after)


# -- a re-run of extract.yml, the documented recovery, on converged servers ------------------------
# One job of two shards on ct1 alone (extract.yml --limit ct1,pve1,localhost), a small dataset:
# 1. extract.yml starts it; both shards complete; a second extract.yml leaves the host alone.
# 2. shard 1's output is removed (to be redone) and the dataset is edited in place: extract.yml
#    refuses the changed dataset once, for the whole job, before any shard starts (shard 1, whose
#    job has no manifest now, would take the new one while shard 0 refuses it).
# 3. the dataset is put back: extract.yml starts shard 1 again (the host was converged), it completes.
RERUN_JOB = 'fleetrerun'
RERUN_SAMPLES = 60
RERUN_UNIT = 'eagle3-extraction-job@%s-shard-%%d.service' % RERUN_JOB
RERUN_DIR = '%s/%s' % (OUTPUT_ROOT, RERUN_JOB)


def rerun_status(shard):
    result = ct('ct1', 'cat %s/shard-%d-of-2/status.json' % (RERUN_DIR, shard), check=False, timeout=20)
    return json.loads(result.stdout) if result.returncode == 0 and result.stdout.strip() else {}


def rerun_complete(shard):
    status = rerun_status(shard)
    return status.get('state') == 'complete' and status.get('samples_done') == status.get('samples_total') > 0


def ct1_row(runner):
    table = debug_msg(runner, 'Print one line per extraction server, then each failure and its cause') or ''
    return next((line for line in table.splitlines() if line.startswith('ct1 ')), '')


@pytest.fixture(scope='module')
def rerun(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('rerun')
    if ct('ct1', 'true', check=False, timeout=15).returncode != 0:
        pct('ct1', 'start')
        wait_for('ct1 to answer', lambda: ct('ct1', 'true', check=False, timeout=10).returncode == 0, 120)
    units = ' '.join(RERUN_UNIT % i for i in range(2))
    ct('ct1', 'systemctl disable --now %s >/dev/null 2>&1; systemctl reset-failed %s >/dev/null 2>&1; '
              'rm -rf %s /etc/eagle3-extraction/%s-* /var/lib/eagle3-extraction/%s.jsonl; true'
              % (units, units, RERUN_DIR, RERUN_JOB, RERUN_JOB))
    subprocess.run(['bash', os.path.join(REPO, 'lab', 'fleet', 'wheelhouse.sh')], check=True,
                   capture_output=True, timeout=900)
    dataset = tmp / 'dataset.jsonl'
    subprocess.run([os.path.join(VENV_BIN, 'python'), os.path.join(REPO, 'tests', 'job', 'demo_dataset.py'),
                    '--samples', str(RERUN_SAMPLES), '--out', str(dataset)], check=True, capture_output=True)
    original = dataset.read_bytes()
    extravars = {
        'extraction_job_dataset': str(dataset), 'extraction_job_name': RERUN_JOB,
        'extraction_job_shard_count': 2, 'extraction_job_shard_indexes': [0, 1],
        'extraction_job_concurrency': CONCURRENCY, 'extraction_job_restart_sec': 1,
        'sglang_server_env': {'SGLANG_STANDIN_LOAD_SECONDS': '2', 'SGLANG_STANDIN_NUM_LAYERS': '61',
                              'SGLANG_STANDIN_FORWARD_MS': '20'},
    }
    facts = {}

    def extract(name):
        runner, output = playbook(tmp, name, 'extract.yml', extravars, limit='ct1,pve1,localhost')
        return {'rc': runner.rc, 'row': ct1_row(runner), 'output': output}

    # 1. started, complete, then left alone
    facts['start'] = extract('start')
    assert facts['start']['rc'] == 0, facts['start']['output'][-3000:]
    for shard in (0, 1):
        wait_for('shard %d to complete' % shard, lambda s=shard: rerun_complete(s), 180)
    facts['converged'] = extract('converged')
    facts['shard0_files'] = ct('ct1', "find %s/shard-0-of-2 -name '*.ckpt' -printf '%%p %%i %%T@\\n' | sort"
                               % RERUN_DIR).stdout

    # 2. shard 1's output removed, the dataset edited in place: refused for the whole job
    ct('ct1', 'rm -rf %s/shard-1-of-2' % RERUN_DIR)
    lines = original.decode().splitlines(True)
    edited = json.loads(lines[0])
    edited['input_ids'] = edited['input_ids'][:-1] + [7]
    dataset.write_text(json.dumps(edited) + '\n' + ''.join(lines[1:]))
    facts['changed'] = extract('changed')
    time.sleep(5)
    facts['changed_after'] = {
        'shard1': ct('ct1', 'ls -d %s/shard-1-of-2' % RERUN_DIR, check=False).returncode == 0,
        'active': ct('ct1', 'systemctl is-active %s' % units, check=False).stdout.split(),
        'host_dataset': ct('ct1', 'sha256sum /var/lib/eagle3-extraction/%s.jsonl' % RERUN_JOB).stdout.split()[0]}

    # 3. the dataset put back: shard 1 is started again and completes; shard 0's files are untouched
    dataset.write_bytes(original)
    facts['restored'] = extract('restored')
    facts['restored_complete'] = wait_for('shard 1 to complete again', lambda: rerun_complete(1), 180)
    facts['shard0_files_after'] = ct('ct1', "find %s/shard-0-of-2 -name '*.ckpt' -printf '%%p %%i %%T@\\n' | sort"
                                     % RERUN_DIR).stdout
    facts['original_sha256'] = __import__('hashlib').sha256(original).hexdigest()

    # 4. shard 1 redone on a disk too small (a floor no disk has): its refusal, its reason and the fix
    #    are extract.yml's, not "applied"; 5. then with room: started again, complete
    ct('ct1', 'rm -rf %s/shard-1-of-2' % RERUN_DIR)
    room = dict(extravars)
    extravars.update(extraction_job_output_free_floor_gib=100000, extraction_job_output_free_resume_gib=100000)
    facts['no_space'] = extract('no_space')
    extravars.clear()
    extravars.update(room)
    facts['space'] = extract('space')
    facts['space_complete'] = wait_for('shard 1 to complete with room', lambda: rerun_complete(1), 180)

    # 6. one finished file damaged, another removed: verify names both, repair.yml
    #    moves the damaged one aside (kept) and starts the units, the jobs redo them, verify passes
    def verify():
        runner, output = playbook(tmp, 'verify-%d' % len(facts.setdefault('verified', [])), 'playbooks/verify.yml',
                                  {'extraction_job_name': RERUN_JOB, 'verify_hosts': 'ct1'})
        facts['verified'].append(output)
        return {'rc': runner.rc, 'output': output}

    files = sorted(ct('ct1', "find %s -name '*.ckpt'" % RERUN_DIR).stdout.split())
    facts['damaged'], facts['removed'] = files[0], files[-1]
    # eight bytes in the middle overwritten (the same size: only the sha256 tells)
    ct('ct1', "size=$(stat -c %%s %s); printf DAMAGED! | dd of=%s bs=1 seek=$((size / 2)) conv=notrunc status=none"
       % (facts['damaged'], facts['damaged']))
    ct('ct1', 'rm -f %s' % facts['removed'])
    facts['before_repair'] = verify()
    runner, output = playbook(tmp, 'repair', 'playbooks/repair.yml', {'extraction_job_name': RERUN_JOB},
                              limit='ct1,localhost')
    facts['repair'] = {'rc': runner.rc, 'output': output}
    wait_for('the repaired shards to finish', lambda: all(rerun_complete(s) for s in (0, 1)) and not any(
        state == 'active' for state in ct('ct1', 'systemctl is-active %s' % units, check=False).stdout.split()), 180)
    facts['after_repair'] = verify()
    facts['kept'] = ct('ct1', 'ls %s/shard-*/damaged/' % RERUN_DIR, check=False).stdout.split()
    ct('ct1', 'systemctl disable --now %s >/dev/null 2>&1; true' % units)
    return facts


def test_a_rerun_leaves_a_complete_job_on_converged_servers_alone(rerun):
    assert rerun['converged']['rc'] == 0, rerun['converged']['output'][-3000:]
    assert ' unchanged' in rerun['converged']['row'], rerun['converged']['row']


def test_a_dataset_changed_under_the_same_job_name_is_refused_once_for_the_whole_job(rerun):
    changed = rerun['changed']
    assert changed['rc'] != 0, changed['output'][-3000:]
    assert changed['output'].count("job '%s' would have more than one dataset" % RERUN_JOB) == 1, \
        changed['output'][-3000:]
    assert 'shard-0-of-2 on ct1' in changed['output']
    # before any shard starts: shard 1 (no manifest) did not take the new dataset, nothing was copied
    after = rerun['changed_after']
    assert not after['shard1'] and after['host_dataset'] == rerun['original_sha256'], after
    assert 'applied' not in changed['row'], changed['row']


def test_a_rerun_starts_again_a_shard_whose_output_was_removed(rerun):
    restored = rerun['restored']
    assert restored['rc'] == 0, restored['output'][-3000:]
    assert ' applied' in restored['row'], restored['row']
    assert rerun['restored_complete']
    # the complete shard was left as it was
    assert rerun['shard0_files_after'] == rerun['shard0_files'] and rerun['shard0_files'].strip()


def test_a_refusal_is_shown_with_its_fix_and_a_rerun_with_room_starts_the_shard_again(rerun):
    refused, space = rerun['no_space'], rerun['space']
    # ct1 alone in the play: its failure ends the run before the table; the failure is the output's
    assert refused['rc'] != 0 and 'applied' not in refused['row'], refused['output'][-3000:]
    assert '%s-shard-1.service refused' % RERUN_JOB in refused['output'], refused['output'][-3000:]
    assert 'free' in refused['output'] and 'run extract.yml again' in refused['output']
    assert space['rc'] == 0 and ' applied' in space['row'], space['output'][-3000:]
    assert rerun['space_complete']


def test_repair_redoes_what_verify_found_damaged_or_missing_and_keeps_the_damaged_file(rerun):
    before, repair, after = rerun['before_repair'], rerun['repair'], rerun['after_repair']
    assert before['rc'] != 0, before['output'][-3000:]
    assert repair['rc'] == 0, repair['output'][-3000:]
    assert after['rc'] == 0 and 'verified: %d samples exactly once' % RERUN_SAMPLES in after['output'], \
        after['output'][-3000:]
    kept = [name for name in rerun['kept'] if not name.endswith('.reason')]
    assert len(kept) == 1 and kept[0].startswith(os.path.basename(rerun['damaged'])), rerun['kept']
