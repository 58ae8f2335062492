"""The job's stall watchdog and capture checks on the local fleet (3 containers), as a user runs the job: one
extract.yml, each container's server made faulty by its own inventory variables (sglang_server_env reaches the
stand-in server's unit), then what status.yml, systemd, the job's log and its files say.

- ct1 (shard 0), a wedged server: SGLANG_STANDIN_HANG_AFTER answers the capture check and ANSWERED samples, then
  takes every request and never answers (its /health stays 200). A short extraction_job_stall_window and
  extraction_job_stall_restarts_max: the job says `stalled` (status.json, its metrics, its log), restarts itself
  (exit 3, the count grows in stall.json and systemd's NRestarts), never says plain `running` once stalled, and
  past the bound ends `stalled, stopped after N restarts` (exit 4, the unit failed). The ANSWERED samples are
  durable, once each.
- ct2 (shard 1), a wrong capture: SGLANG_STANDIN_RETURN_OTHER=1 (return_hidden_states answers other values than
  the capture dumps). The capture check stops the shard before any sample: capture_mismatch, exit 2, no .ckpt, no
  sample sent to the server; extract.yml fails naming it.
- ct3 (shard 2), a capture that trains nothing: SGLANG_STANDIN_DUMP_VALUES=zeros with the capture check off
  (extraction_job_capture_check: false, so that the drain is what meets the dumps): every dump is rejected at the
  drain, named degenerate in status.json, the log and rejected/<dump>.reason, and no file is written. The first
  run ends incomplete (exit 1) and systemd starts it again; the second, rejected again, stops for good (exit 2):
  restarts would go on for ever, each keeping every dump once more.

At the end the faults are taken away: the job's units and files are removed and extract.yml (no dataset) rolls the
servers out again with the inventory's own environment, healthy, as the next fleet tests expect them.
"""

import json
import os
import re
import time

import pytest
import yaml

from fleet_helpers import CTS, FLEET, ct, job_inputs, remove_job, require_containers_up, shown_json
from test_extraction_fleet import DEMO_INVENTORY, debug_msg, playbook, wait_for

SHARDS = {'ct1': 0, 'ct2': 1, 'ct3': 2}
JOB = 'faultx'
SAMPLES = 120
OUTPUT_DIR = '/srv/eagle3-extraction/%s' % JOB
UNIT = 'eagle3-extraction-job@%s-shard-%%d.service' % JOB
LOG = '/var/log/eagle3-extraction/%s-shard-%%d.log' % JOB
DUMP_DIR = '/dev/shm/sglang_hs'
# ct1's job writes its Prometheus metrics here (extraction_job_metrics_dir), read as a file
METRICS_DIR = '/var/lib/eagle3-faultx-metrics'
# ct1: the server answers the capture check and this many samples, then never again
ANSWERED = 10
# ct1's stall window (s) and bound on restarts: three runs of the job, each stalled, the last for good
WINDOW = 3
RESTARTS_MAX = 2
# the inventory's own server environment (group_vars), which each host's faults are added to
DEMO_SERVER_ENV = yaml.safe_load(open(os.path.join(DEMO_INVENTORY, 'group_vars', 'extraction_servers.yml'),
                                      encoding='utf-8'))['sglang_server_env']
FAULTS = {
    'ct1': {'sglang_server_env': dict(DEMO_SERVER_ENV, SGLANG_STANDIN_HANG_AFTER=str(ANSWERED + 1)),
            'extraction_job_stall_window': WINDOW, 'extraction_job_stall_restarts_max': RESTARTS_MAX,
            'extraction_job_restart_sec': 1, 'extraction_job_metrics_dir': METRICS_DIR},
    'ct2': {'sglang_server_env': dict(DEMO_SERVER_ENV, SGLANG_STANDIN_RETURN_OTHER='1')},
    # paced (2 requests at a time, half a second a pass), so that extract.yml sees the shard sending
    'ct3': {'sglang_server_env': dict(DEMO_SERVER_ENV, SGLANG_STANDIN_DUMP_VALUES='zeros',
                                      SGLANG_STANDIN_FORWARD_MS='500'),
            'extraction_job_capture_check': False, 'extraction_job_concurrency': 2,
            'extraction_job_restart_sec': 1},
}
# what a run stalled on its capture check's prompt waits on (status.json's `stalled`)
CHECK_UNANSWERED = r"the capture check's prompt sent and unanswered for \d+ s"
# where ct1's status.json is copied to as it changes (watch_status)
WATCH_LOG = '/run/%s-status-watch.log' % JOB
UNIT_PROPERTIES = ('ActiveState', 'Result', 'ExecMainStatus', 'NRestarts')

pytestmark = FLEET + [pytest.mark.whole_fleet]


def shard_dir(name):
    return '%s/shard-%d-of-3' % (OUTPUT_DIR, SHARDS[name])


def unit_state(name):
    """{property: value} of the shard's unit, as `systemctl show` gives them."""
    out = ct(name, 'systemctl show %s %s' % (' '.join('-p ' + p for p in UNIT_PROPERTIES), UNIT % SHARDS[name]),
             timeout=20).stdout
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def status(name):
    """The shard's status.json; {} before its job wrote one."""
    out = ct(name, 'cat %s/status.json 2>/dev/null' % shard_dir(name), check=False, timeout=20).stdout
    return json.loads(out) if out.strip() else {}


def files(name, pattern):
    return ct(name, "find %s -name '%s' | sort" % (OUTPUT_DIR, pattern), check=False).stdout.split()


def watch_status(name):
    """A loop on the host that copies the shard's status.json every half second into WATCH_LOG (no ssh a look: the
    controller has two cores), for 10 minutes at most; its pid. A stalled run's status lasts only the restart's delay
    and the next run's start."""
    loop = 'while :; do cat %s/status.json 2>/dev/null; echo @@@; sleep 0.5; done' % shard_dir(name)
    return ct(name, "rm -f %s; nohup timeout 600 sh -c '%s' >%s 2>&1 </dev/null & echo $!"
              % (WATCH_LOG, loop, WATCH_LOG)).stdout.strip()


def watched(name, pid):
    """The loop stopped: every status.json it saw, in order, each once in a row (a copy caught between two writes
    skipped)."""
    out = ct(name, 'kill %s 2>/dev/null; cat %s; rm -f %s' % (pid, WATCH_LOG, WATCH_LOG)).stdout
    seen = []
    for text in out.split('@@@'):
        try:
            found = json.loads(text) if text.strip() else None
        except ValueError:
            continue
        if found and (not seen or seen[-1] != found):
            seen.append(found)
    return seen


def clean_slate():
    """No unit or file of this job (its metrics dir too) from an earlier run."""
    for name in CTS:
        remove_job(lambda command, n=name: ct(n, command), JOB, 3, METRICS_DIR)


def faults_inventory(tmp):
    path = tmp / 'faults.yml'
    path.write_text(yaml.safe_dump({'all': {'hosts': FAULTS}}))
    return path


def run_faults(tmp, timings):
    """The scenario (the module's doc): what each shard showed."""
    t0 = time.time()
    require_containers_up()
    clean_slate()
    dataset = job_inputs(tmp, SAMPLES)
    facts = {}
    watch = watch_status('ct1')
    try:
        runner, output = playbook(tmp, 'extract', 'extract.yml', {
            'extraction_job_dataset': str(dataset), 'extraction_job_name': JOB, 'extraction_job_shard_count': 3},
            inventories=[faults_inventory(tmp)])
        facts['extract'] = (runner.rc, debug_msg(runner, 'Print one line per extraction server, then each failure '
                                                         'and its cause'), output)
        timings['extract.yml'] = round(time.time() - t0)
        facts['environment'] = dict((name, ct(name, 'systemctl show -p Environment --value sglang-extraction').stdout)
                                    for name in CTS)
        wait_for('ct1 to stop for good', lambda: unit_state('ct1')['ActiveState'] == 'failed', 120)
        wait_for('ct3 to stop for good', lambda: unit_state('ct3')['ActiveState'] == 'failed', 120)
        timings['faults'] = round(time.time() - t0)
    finally:
        facts['ct1_seen'] = watched('ct1', watch)
    for name in CTS:
        facts[name] = {'status': status(name), 'unit': unit_state(name), 'ckpts': files(name, '*.ckpt'),
                       'log': ct(name, 'cat %s' % LOG % SHARDS[name], check=False).stdout,
                       'rejected': ct(name, 'cat %s/rejected/*.reason 2>/dev/null; true' % shard_dir(name)
                                      ).stdout.splitlines()}
    facts['ct1']['stall.json'] = json.loads(ct('ct1', 'cat %s/stall.json' % shard_dir('ct1')).stdout)
    facts['ct1']['metrics'] = ct('ct1', 'cat %s/eagle3_extraction_%s_shard0.prom' % (METRICS_DIR, JOB)).stdout
    facts['ct2']['capture_stats'] = json.loads(ct('ct2', 'cat %s/CAPTURE_STATS.json' % DUMP_DIR).stdout)

    # what a user reads: status.yml's report, for scripts
    runner, output = playbook(tmp, 'status', 'playbooks/status.yml',
                              {'extraction_job_name': JOB, 'status_format': 'json'})
    assert runner.rc == 0, output[-4000:]
    facts['report'] = shown_json(runner, 'Show the report as JSON')
    timings['status.yml'] = round(time.time() - t0)
    return facts


def restore(tmp):
    """The faults taken away, whatever the scenario came to: no unit or file of this job, and every server rolled
    out again with the inventory's own environment, healthy, as the fleet's next tests expect it."""
    clean_slate()
    runner, output = playbook(tmp, 'restore', 'extract.yml', {})
    assert runner.rc == 0, output[-4000:]
    for name in CTS:
        environment = ct(name, 'systemctl show -p Environment --value sglang-extraction').stdout
        assert 'SGLANG_STANDIN_' in environment and not re.search('HANG_AFTER|RETURN_OTHER|DUMP_VALUES|FORWARD_MS',
                                                                  environment), (name, environment)


@pytest.fixture(scope='module')
def faults(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('faults')
    t0 = time.time()
    timings = {}
    try:
        yield run_faults(tmp, timings)
    finally:
        restore(tmp)
        timings['restored'] = round(time.time() - t0)
        print('job faults fleet timings (s): %s' % timings, flush=True)


def shard_row(faults, name):
    rows = [row for row in faults['report']['shards'] if row['host'] == name]
    assert len(rows) == 1, faults['report']['shards']
    return rows[0]


def test_each_fault_reached_its_server_through_the_inventory(faults):
    environment = faults['environment']
    assert 'SGLANG_STANDIN_HANG_AFTER=%d' % (ANSWERED + 1) in environment['ct1'].split(), environment
    assert 'SGLANG_STANDIN_RETURN_OTHER=1' in environment['ct2'].split(), environment
    assert 'SGLANG_STANDIN_DUMP_VALUES=zeros' in environment['ct3'].split(), environment


def test_a_wedged_server_is_a_stall_restarted_then_stopped_for_good(faults):
    found = faults['ct1']
    final, unit = found['status'], found['unit']
    # exit 4, which the unit does not restart, after RESTARTS_MAX restarts of its own (exit 3)
    assert unit == dict(unit, ActiveState='failed', Result='exit-code', ExecMainStatus='4',
                        NRestarts=str(RESTARTS_MAX)), unit
    assert final['state'] == 'stalled' and final['stall_final'] is True, final
    assert final['stall_restarts'] == RESTARTS_MAX and final['stall_restarts_max'] == RESTARTS_MAX, final
    assert found['stall.json']['restarts'] == RESTARTS_MAX and found['stall.json']['restarts_total'] == RESTARTS_MAX
    # it names what it waits on: the wedged server's answer to the capture check, a restarted run's first request
    assert re.fullmatch(CHECK_UNANSWERED, final['stalled']), final['stalled']
    # the log: each stall, what it waited on (first the samples' requests the server took), the restarts counted
    # up, then the stop
    stalls = re.findall(r'ERROR stalled: no sample settled for \d+ s, waiting on (.*); (.*)', found['log'])
    assert [then for _waited, then in stalls] == [
        'restart %d of at most %d' % (n, RESTARTS_MAX) for n in range(1, RESTARTS_MAX + 1)] + [
        'stopped: %d restarts since the last durable sample did not help (the bound, stall_restarts_max, is %d)'
        % (RESTARTS_MAX, RESTARTS_MAX)], found['log'][-3000:]
    waited = [waited for waited, _then in stalls]
    assert re.fullmatch(r'\d+ requests sent and unanswered, the oldest for \d+ s', waited[0]), waited
    assert all(re.fullmatch(CHECK_UNANSWERED, w) for w in waited[1:]), waited
    # what the server answered is durable, once; nothing else was written
    assert final['samples_done'] == ANSWERED and len(found['ckpts']) == ANSWERED, (final, found['ckpts'])
    assert found['rejected'] == []


def test_the_stalled_shard_says_so_at_each_restart_and_never_looks_healthy(faults):
    seen = faults['ct1_seen']
    assert seen, 'no status.json of ct1 was seen'
    first = next(i for i, s in enumerate(seen) if s['state'] == 'stalled')
    # before the stall the samples the server answered were made durable, as the shard ran
    assert any(s['state'] == 'running' and s['samples_done'] > 0 for s in seen[:first]), seen[:first]
    # each stall a user could see, with its restart counted up, then the final one
    stalled = [(s['stall_restarts'], s['stall_final']) for s in seen if s['state'] == 'stalled']
    assert sorted(set(stalled)) == [(n, False) for n in range(1, RESTARTS_MAX + 1)] + [(RESTARTS_MAX, True)], stalled
    # once stalled, never plain "running" (a restarted run says its stall restart) and no progress
    for later in seen[first:]:
        assert later['state'] != 'running' or later['stall_restarts'] > 0, later
        assert later['samples_done'] == ANSWERED, later


def test_the_stall_is_in_the_status_report_and_the_metrics(faults):
    row = shard_row(faults, 'ct1')
    assert row['state'] == 'stalled' and not row['at_work'], row
    assert row['state_text'].startswith('stalled, stopped after %d restarts: ' % RESTARTS_MAX), row
    assert re.fullmatch(CHECK_UNANSWERED, row['stalled']) and row['samples_done'] == ANSWERED, row
    assert faults['report']['totals']['stalled'] == ['ct1/0'], faults['report']['totals']
    metrics = faults['ct1']['metrics']
    state = dict(re.findall(r'^eagle3_job_state\{[^}]*state="([a-z_]+)"\} (\d)$', metrics, re.M))
    assert state['stalled'] == '1' and set(v for k, v in state.items() if k != 'stalled') == {'0'}, metrics
    assert re.search(r'^eagle3_job_restarts\{[^}]*\} %d$' % RESTARTS_MAX, metrics, re.M), metrics


def test_a_capture_that_differs_from_the_server_stops_the_shard_before_any_sample(faults):
    found = faults['ct2']
    final, unit = found['status'], found['unit']
    assert unit == dict(unit, ActiveState='failed', Result='exit-code', ExecMainStatus='2', NRestarts='0'), unit
    assert final['state'] == 'capture_mismatch' and final['samples_done'] == 0, final
    # status.json's capture_check: the layer that differs (one value of the second, captured layer 30 of 61)
    check = final['capture_check']
    assert check['result'] == 'capture_mismatch' and check['reason'] == "the job's start", check
    assert check['layer'] == 2 and check['captured_layer'] == 30 and check['values_differing'] == 1, check
    assert check['max_abs_diff'] == 1.0, check
    said = 'the capture check failed, the shard stops: the dump differs from what the server returns'
    assert said in final['last_errors'][-1] and said in found['log'], (final['last_errors'], found['log'][-3000:])
    # nothing written, no sample sent: the capture dumped the check's prompt alone, kept aside with its reason
    assert found['ckpts'] == [] and found['capture_stats']['dumped'] == 1, (found['ckpts'], found['capture_stats'])
    assert len(found['rejected']) == 1 and found['rejected'][0].startswith('capture_mismatch: '), found['rejected']
    row = shard_row(faults, 'ct2')
    assert row['state'] == 'capture_mismatch' and row['samples_done'] == 0, row


def test_extract_yml_fails_naming_the_capture_mismatch(faults):
    rc, table, output = faults['extract']
    assert rc != 0, output[-3000:]
    lines = table.splitlines()
    assert [line.split()[-1] for line in lines if line.startswith('ct')] == ['applied', 'failed', 'applied'], table
    # each shard's start: the zero-dumping shard was sending, the stalling one too (or already stalled, restarting
    # itself), ct2's refused, with its reason
    assert 'job of ct3: shard-2 sending' in lines, table
    assert any(re.match(r'job of ct1: shard-0 (sending$|stalled \()', line) for line in lines), table
    assert ('job of ct2: shard-1 refused (job: the capture check failed, the shard stops: the dump differs from what '
            'the server returns through return_hidden_states: 1 of ') in table, table
    assert any(line.startswith('FAILED ct2: ') and UNIT % 1 in line for line in lines), table


def test_dumps_that_are_all_zero_are_rejected_at_the_drain_and_no_file_is_written(faults):
    found = faults['ct3']
    final = found['status']
    total = final['samples_total']
    assert total > 0 and final['state'] == 'incomplete', final
    assert final['samples_done'] == 0 and final['samples_failed'] == total and found['ckpts'] == [], final
    assert final['capture_check'] == {'enabled': False, 'checks': 0}, final['capture_check']
    # each dump kept aside with its reason, once by each of the two runs; the same in status.json and the log
    degenerate = 'rejected: degenerate hidden_state: all zero'
    assert len(found['rejected']) == 2 * total and all(degenerate in why for why in found['rejected']), \
        (len(found['rejected']), found['rejected'][:3])
    assert any(degenerate in error for error in final['last_errors']), final['last_errors']
    assert found['log'].count(degenerate) >= 2 * total, found['log'][-3000:]
    # the first run's exit 1 (samples left) restarted by systemd; the second's exit 2 is not: a third run would get
    # the same dumps. It says why; status.yml names the failures
    unit = found['unit']
    assert (unit['ExecMainStatus'], unit['ActiveState'], unit['NRestarts']) == ('2', 'failed', '1'), unit
    assert ('%d samples whose dumps were rejected in this run and the one before' % total) in final['last_errors'][-1], \
        final['last_errors']
    row = shard_row(faults, 'ct3')
    assert row['samples_failed'] == total and row['samples_done'] == 0 and row['state'] == 'incomplete', row
