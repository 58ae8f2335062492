"""Training while extracting on the local fleet (README "Training while extracting"), through ansible-runner.

One scenario, few playbook runs:

1. ``extract.yml -i inventory/demo -e extraction_job_mode=online``: ct3 gets the Mooncake master and its segment,
   ct1, ct2 and ct3 their stand-in servers (the real capture module) with a capture gateway each, ct3 the trainer:
   SpecForge 0.2.0's real producer leasing the fixture's 200 conversations (lab/fixtures/online) to the three
   gateways, and the reader (SpecForge's own consumer-side API, no training: a CPU) taking every sample back from
   the store and recording its token ids and each feature's sha256.
2. Mid-run, ct2's server is SIGKILLed (systemd brings it back; the producer leases its prompts again).
3. Every sample is consumed exactly once; no process that holds hidden states (servers, gateways, master, segment)
   writes them to a disk (/proc/<pid>/io write_bytes, sampled through the run: tmpfs writes are not counted there),
   and none is left at rest in the dump dirs, the gateways' rejected dirs or the job's output root.
4. The files mode on the same servers and the same samples (their token ids as the dataset): every sample's files
   equal, bit for bit, the online features of the same sample (tests/online/online_fleet_check.py, SpecForge's own
   loader). The two modes' samples/s, one run, go to docs/benchmarks.md ("Training while extracting").
5. stop.yml: the trainer, the servers and gateways, then the master; nothing of the job is left running.
"""

import json
import os
import subprocess
import sys
import time

import ansible_runner
import pytest

from collection_helpers import REPO, VENV_BIN
from fleet_helpers import CTS, FLEET, ct
from test_extraction_fleet import DEMO_INVENTORY, TORCH_PYTHON, playbook, wait_for

sys.path.insert(0, os.path.join(REPO, 'tests', 'online'))
from process_writes import add_sample, by_group  # noqa: E402  pylint: disable=wrong-import-position

JOB = 'onl'
SAMPLES = 200
OUTPUT_DIR = '/srv/eagle3-online/output'
DUMP_DIR = '/dev/shm/sglang_hs'
OUTPUT_ROOT = '/srv/eagle3-extraction'
SERVER_UNIT = 'sglang-extraction.service'
PRODUCER_UNIT = 'eagle3-online-producer.service'
# ct2's server is killed once the reader has this many samples: early in the run, with most prompts still to lease
KILL_AT = 10
# the processes that hold hidden states (pgrep -f patterns, anchored so that the shell running pgrep is not one):
# none of them may write them to a disk
HOLDERS = {'server': '^([^ ]*python[0-9.]* -m sglang_standin|sglang::)',
           'gateway': '^[^ ]*python[0-9.]* -m eagle3_extraction_job gateway',
           'master': '^[^ ]*/mooncake_master ', 'segment': '^[^ ]*/mooncake_client '}
# and the trainer's, which write metadata only (control files, records of hashes)
TRAINER = {'producer': '^[^ ]*python[0-9.]* [^ ]*/specforge train', 'reader': '^[^ ]*python[0-9.]* -m eagle3_extraction_job reader'}
RESULTS = os.path.join(REPO, 'benchmarks', 'results', 'online-fleet.json')

pytestmark = FLEET + [
    pytest.mark.whole_fleet,
    pytest.mark.skipif(not os.path.exists(TORCH_PYTHON), reason='the torch venv is not built: bash lab/bootstrap/torch-venv.sh'),
]


def reader_attempt_dir(run_id, attempt):
    """Where the reader keeps one attempt's records.jsonl and progress.json (each attempt apart)."""
    return '%s/%s-reader/attempt-%04d' % (OUTPUT_DIR, run_id, attempt)


def progress(reader_dir):
    found = ct('ct3', 'cat %s/progress.json 2>/dev/null' % reader_dir, check=False, timeout=20).stdout
    return json.loads(found) if found.strip() else {}


def written(counters, baseline=False):
    """Every process of HOLDERS and TRAINER on every container, sampled into ``counters`` (process_writes)."""
    groups = dict(HOLDERS, **TRAINER)
    for name in CTS:
        script = '; '.join(
            "for p in $(pgrep -f '%s'); do echo %s $p $(awk '/^write_bytes/ {print $2}' /proc/$p/io 2>/dev/null); done"
            % (pattern, group) for group, pattern in groups.items())
        sample = [(parts[0], parts[1], int(parts[2])) for parts in
                  (line.split() for line in ct(name, script, check=False, timeout=20).stdout.splitlines())
                  if len(parts) == 3]
        add_sample(counters, name, sample, baseline)


def extract_async(tmp, extravars, name='online'):
    """extract.yml started through ansible-runner without waiting: (thread, runner); its files in tmp/name."""
    private = tmp / name
    private.mkdir()
    if VENV_BIN not in os.environ['PATH'].split(os.pathsep):
        os.environ['PATH'] = VENV_BIN + os.pathsep + os.environ['PATH']
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(private), project_dir=REPO, playbook='extract.yml', inventory=[DEMO_INVENTORY],
        extravars=extravars, envvars={'ANSIBLE_CONFIG': os.path.join(REPO, 'ansible.cfg')}, quiet=True)
    return thread, runner


@pytest.fixture(scope='module')
def online(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('online')
    run_id = 'onl%d' % int(time.time())
    reader_dir = reader_attempt_dir(run_id, 1)
    extravars = {'extraction_job_mode': 'online', 'extraction_job_name': JOB, 'online_training_run_id': run_id}
    started = time.time()
    thread, runner = extract_async(tmp, extravars)
    # Polled while extract.yml runs: the trainer starts at its end and a run of the fixture takes some 20 s. When the
    # producer starts, what the processes that hold hidden states have written so far (their start: logs, bytecode)
    # is the baseline; one started later (ct2's server after its kill) counts from 0.
    counters, killed, trainer_started, found = {}, None, None, {}
    deadline = time.time() + 900
    while found.get('state') != 'done':
        assert time.time() < deadline, 'waited 900 s for the online run: %s' % found
        if not thread.is_alive():
            assert runner.rc == 0, runner.stdout.read()[-6000:]
        if trainer_started is None:
            if ct('ct3', 'systemctl is-active %s' % PRODUCER_UNIT, check=False).stdout.strip() == 'active':
                written(counters, baseline=True)
                trainer_started = time.time()
            time.sleep(0.5)
            continue
        found = progress(reader_dir)
        # the writes sampled just before the kill (the killed server's last count) and after it, not while waiting
        # for it: a sample is an ssh to every container, and one each turn let the run go on for seconds between
        # two looks at the progress (killed at 105 of 200 once, for KILL_AT 10). No process ends before the kill
        if killed is None and found.get('consumed', 0) >= KILL_AT:
            written(counters)
            ct('ct2', 'systemctl kill --signal=KILL %s' % SERVER_UNIT)
            killed = found.get('consumed')
        if killed is not None:
            written(counters)
    done = time.time()
    thread.join()
    assert runner.rc == 0, runner.stdout.read()[-6000:]
    final = found
    records = [json.loads(line) for line in ct(
        'ct3', 'cat %s/records.jsonl' % reader_dir, timeout=60).stdout.splitlines() if line.strip()]
    # dumps (the capture's own stats and reserve files are not hidden states), the job's output, rejected dumps
    leftovers = dict((name, ct(name, "find %s -type f \\( -name '*.pt' -o -name '*.tmp' \\) | head -20; "
                                     "find %s/%s -type f 2>/dev/null | head -20; "
                                     "find %s -path '*gateway-rejected*' -type f 2>/dev/null | head -5"
                                     % (DUMP_DIR, OUTPUT_ROOT, JOB, OUTPUT_ROOT), check=False).stdout.split())
                     for name in CTS)
    return {'tmp': tmp, 'run_id': run_id, 'files_job': 'files%s' % run_id, 'reader_dir': reader_dir, 'records': records, 'progress': final,
            'killed_at': killed, 'io': counters, 'leftovers': leftovers,
            'extract_seconds': trainer_started - started, 'online_seconds': done - trainer_started}


def test_every_sample_is_consumed_once_though_a_server_was_killed(online):
    assert online['killed_at'] is not None and online['killed_at'] < SAMPLES // 2, online['killed_at']
    ids = [record['sample_id'] for record in online['records']]
    assert len(ids) == SAMPLES and len(set(ids)) == SAMPLES, (len(ids), len(set(ids)))
    assert online['progress']['consumed'] == SAMPLES
    servers = set(record['server'] for record in online['records'])
    assert len(servers) == 3, servers   # every gateway served


def test_no_hidden_state_is_written_to_a_disk_or_left_at_rest(online):
    hidden = sum(_nbytes(record['features'][name]) for record in online['records'] for name in ('hidden_state', 'target'))
    writes = by_group(online['io'])
    # the holders write their logs and nothing else: less than a hundredth of what they moved
    for group in HOLDERS:
        assert writes.get(group, 0) < hidden / 100, (group, writes, hidden)
    assert online['leftovers'] == dict((name, []) for name in CTS), online['leftovers']
    online['hidden_bytes'], online['writes'] = hidden, writes


def test_the_files_mode_writes_the_same_tensors_for_the_same_samples(online):
    tmp, files_job = online['tmp'], online['files_job']
    dataset = tmp / 'dataset.jsonl'
    with open(dataset, 'w', encoding='utf-8') as f:
        for index, record in enumerate(online['records']):
            ids = record['input_ids']
            f.write(json.dumps({'id': 'r%05d' % index, 'input_ids': ids, 'loss_mask': [1] * len(ids)}) + '\n')
    started = time.time()
    runner, output = playbook(tmp, 'files', 'extract.yml',
                              {'extraction_job_name': files_job, 'extraction_job_dataset': str(dataset)})
    assert runner.rc == 0, output[-6000:]
    shards = {}

    def complete():
        for name in sorted(CTS):
            status = ct(name, 'cat %s/%s/shard-*/status.json 2>/dev/null' % (OUTPUT_ROOT, files_job), check=False).stdout
            shards[name] = json.loads(status) if status.strip() else {}
        return all(s.get('state') == 'complete' for s in shards.values())

    wait_for('the files mode to finish', complete, 600)
    files_seconds = time.time() - started
    local = tmp / 'files-out'
    local.mkdir()
    for name in CTS:
        archive = local / ('%s.tar' % name)
        with open(archive, 'wb') as out:
            subprocess.run(_ssh(CTS[name], 'tar -C %s -cf - %s' % (OUTPUT_ROOT, files_job)), stdout=out, check=True,
                           timeout=300)
        (local / name).mkdir()
        subprocess.run(['tar', '-C', str(local / name), '-xf', str(archive)], check=True)
    records = tmp / 'records.jsonl'
    records.write_text(''.join(json.dumps(r) + '\n' for r in online['records']))
    argv = [TORCH_PYTHON, os.path.join(REPO, 'tests', 'online', 'online_fleet_check.py'), '--records', str(records),
            '--dataset', str(dataset)]
    for name in CTS:
        argv += ['--count', str(local / name / files_job)]
    check = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    summary = json.loads(check.stdout)
    assert summary['compared'] == SAMPLES
    _record(online, files_seconds)
    for name in CTS:   # the test's files (compared; the next run makes its own)
        ct(name, 'rm -rf %s/%s' % (OUTPUT_ROOT, files_job))


def test_stop_stops_the_trainer_the_servers_and_the_master(online, tmp_path):
    runner, output = playbook(tmp_path, 'stop', 'playbooks/stop.yml', {})
    assert runner.rc == 0, output[-6000:]
    for name in CTS:
        every = '|'.join('(%s)' % pattern for pattern in list(HOLDERS.values()) + list(TRAINER.values()))
        left = ct(name, "pgrep -af '%s' || true" % every).stdout.strip()
        assert left == '', (name, left)


def _ssh(address, command):
    return ['ssh', '-n', '-i', os.path.join(os.environ.get('EAGLE3_LAB', '/var/lib/eagle3-lab'), 'ssh', 'id_ed25519'),
            '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
            '-o', 'LogLevel=ERROR', '-o', 'ProxyCommand=ip netns exec lab-ctl nc %h %p', 'root@' + address, command]


def _nbytes(feature):
    count = 1
    for size in feature['shape']:
        count *= int(size)
    return count * 2


def _record(online, files_seconds):
    """The two modes' figures, one run, for docs/benchmarks.md."""
    found = {'samples': SAMPLES, 'online_seconds': round(online['online_seconds'], 2),
             'online_samples_per_s': round(SAMPLES / online['online_seconds'], 2),
             'files_seconds': round(files_seconds, 2), 'files_samples_per_s': round(SAMPLES / files_seconds, 2),
             'ratio_online_to_files': round(files_seconds / online['online_seconds'], 3),
             'killed_at': online['killed_at'], 'hidden_bytes': online.get('hidden_bytes'),
             'writes_by_group': online.get('writes'), 'extract_seconds': round(online['extract_seconds'], 2)}
    print('online fleet: %s' % json.dumps(found))
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, 'w', encoding='utf-8') as f:
        json.dump(found, f, indent=1)
