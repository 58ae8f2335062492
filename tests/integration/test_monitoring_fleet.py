"""The role monitoring on the local fleet (3 containers), through ansible-runner: one variable
(monitoring_prometheus_host=ct3) and one extract.yml run give a real Prometheus (Debian's package) that scrapes every
container's job metrics (node_exporter's textfile collector) and every server's /metrics during a job.

1. extract.yml starts a job of 3 shards (ct1, ct2, ct3) with monitoring on, a 1 s scrape and evaluation interval
   and a 10 s no-progress window (the role's variables).
2. Every target is up; Prometheus's query API returns, for each shard, the samples done that status.yml shows
   (`-e status_format=json`), to the sample, while the shard is frozen.
3. ct1's job is stalled on purpose (SIGSTOP: its server stays healthy): EAGLE3ShardNoProgress fires for ct1's
   shard within its window, for no other shard; the job goes on (SIGCONT) and the alert clears.
4. Every query of the dashboard returns without error, and at the end of the job every shard's samples done in
   Prometheus equals what status.yml shows.
"""

import json
import os
import subprocess
import time
import urllib.parse

import ansible_runner
import pytest
import yaml

from collection_helpers import REPO, VENV_BIN
from fleet_helpers import CTS, FLEET, ct, job_inputs, remove_job, require_containers_up, shard_statuses, shown_json
from test_extraction_fleet import wait_for

DEMO_INVENTORY = os.path.join(REPO, 'inventory', 'demo')
DASHBOARD = os.path.join(REPO, 'roles', 'monitoring', 'files', 'eagle3-dashboard.json')
SHARDS = {'ct1': 0, 'ct2': 1, 'ct3': 2}
MONITOR = 'ct3'
PROMETHEUS = 'http://%s:9090' % CTS[MONITOR]
JOB = 'monx'
SAMPLES = 9000
JOB_DIR = '/srv/eagle3-extraction/%s' % JOB
UNIT = 'eagle3-extraction-job@%s-shard-%%d.service' % JOB
METRICS_DIR = '/var/lib/prometheus/node-exporter'
# the no-progress window of the test (monitoring_no_progress_seconds); Prometheus scrapes and evaluates each second
WINDOW = 10
# the stand-in's pass: a shard takes a minute or more, so that the others work on while ct1 is stalled
FORWARD_MS = '200'

pytestmark = FLEET + [pytest.mark.whole_fleet]


def prometheus(path, **params):
    """GET PROMETHEUS + path from the switch's netns (where the controller reaches the fleet): the JSON answer."""
    url = PROMETHEUS + path + ('?' + urllib.parse.urlencode(params) if params else '')
    code = ('import sys, urllib.request, urllib.error\n'
            'try:\n print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n'
            'except urllib.error.HTTPError as exc:\n print(exc.read().decode())\n')
    result = subprocess.run(['ip', 'netns', 'exec', 'lab-ctl', 'python3', '-c', code, url], capture_output=True,
                            text=True, check=False, timeout=30)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def query(expr):
    answer = prometheus('/api/v1/query', query=expr)
    assert answer['status'] == 'success', (expr, answer)
    return answer['data']['result']


def by_host_shard(expr):
    return dict(((s['metric']['host'], int(s['metric']['shard'])), float(s['value'][1])) for s in query(expr))


def statuses(name):
    """{shard index: status.json} of the host, as the extraction_status module (status.yml) reads them."""
    return shard_statuses(lambda command: ct(name, command, check=False, timeout=20), JOB_DIR)


def done(name):
    return statuses(name).get(SHARDS[name], {}).get('samples_done', 0)


def status_yml(tmp_path, name):
    """{(host, shard index): samples done} as `status.yml -e status_format=json` prints them (what a user or a
    script reads)."""
    runner, output = playbook(tmp_path, name, 'playbooks/status.yml',
                              {'extraction_job_name': JOB, 'status_format': 'json'})
    assert runner.rc == 0, output[-4000:]
    return dict(((shard['host'], shard['shard_index']), shard['samples_done'])
                for shard in shown_json(runner, 'Show the report as JSON')['shards'])


def firing(alert):
    """{(host, shard)} of the alert's firing instances."""
    return set((a['labels'].get('host'), a['labels'].get('shard')) for a in prometheus('/api/v1/alerts')['data']['alerts']
               if a['labels']['alertname'] == alert and a['state'] == 'firing')


def playbook(tmp_path, name, playbook_path, extravars):
    private = tmp_path / name
    private.mkdir()
    if VENV_BIN not in os.environ['PATH'].split(os.pathsep):
        os.environ['PATH'] = VENV_BIN + os.pathsep + os.environ['PATH']
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=REPO, playbook=playbook_path, inventory=[DEMO_INVENTORY],
        extravars=extravars, envvars={'ANSIBLE_CONFIG': os.path.join(REPO, 'ansible.cfg')}, quiet=True)
    output = runner.stdout.read()
    (private / 'output.log').write_text(output)
    return runner, output


def clean_slate():
    """No unit, output, config or metrics file of this job from an earlier run of this test."""
    for name in CTS:
        remove_job(lambda command, n=name: ct(n, command), JOB, 3, '%s/eagle3_extraction_%s_*' % (METRICS_DIR, JOB))


@pytest.fixture(scope='module')
def scenario(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('monitoring')
    t0 = time.time()
    timings = {}

    def mark(what):
        timings[what] = round(time.time() - t0)
        print('[%4d s] %s' % (timings[what], what), flush=True)

    require_containers_up()
    clean_slate()
    dataset = job_inputs(tmp, SAMPLES)
    extravars = {
        'extraction_job_dataset': str(dataset), 'extraction_job_name': JOB, 'extraction_job_shard_count': 3,
        'extraction_job_restart_sec': 1,
        'sglang_server_env': {'SGLANG_STANDIN_LOAD_SECONDS': '2', 'SGLANG_STANDIN_NUM_LAYERS': '61',
                              'SGLANG_STANDIN_FORWARD_MS': FORWARD_MS},
        # the one variable, and the test's short intervals and window
        'monitoring_prometheus_host': MONITOR,
        'monitoring_scrape_interval': 1, 'monitoring_evaluation_interval': 1,
        'monitoring_no_progress_seconds': WINDOW,
    }
    facts = {'timings': timings}

    # 1. one extract.yml: the servers, the job, node_exporter everywhere, Prometheus on ct3
    runner, output = playbook(tmp, 'extract', 'extract.yml', extravars)
    assert runner.rc == 0, output[-4000:]
    mark('extract.yml')
    facts['config'] = yaml.safe_load(ct(MONITOR, 'cat /etc/prometheus/prometheus.yml').stdout)
    facts['metrics_files'] = dict((name, ct(name, 'ls %s' % METRICS_DIR).stdout.split()) for name in CTS)
    for name in CTS:
        wait_for('%s to be under way' % name, lambda n=name: done(n) >= 20, 90)
    wait_for('Prometheus to scrape every target', lambda: len(query('up == 1')) >= 6, 30)
    facts['up'] = dict(((s['metric']['job'], s['metric']['host']), s['value'][1]) for s in query('up'))

    # 2 and 3. ct1's job frozen: no progress while its server is healthy. Its status file and metrics file stay as
    # they are: Prometheus's samples done must be the status file's, to the sample.
    ct('ct1', 'systemctl kill -s STOP %s' % (UNIT % 0))
    stopped = time.time()
    time.sleep(3)   # a scrape or two of the frozen file
    facts['frozen'] = (status_yml(tmp, 'status-frozen').get(('ct1', 0)),
                       by_host_shard('eagle3_job_samples_done{extraction_job="%s"}' % JOB).get(('ct1', 0)))
    fired = wait_for('EAGLE3ShardNoProgress to fire for ct1', lambda: firing('EAGLE3ShardNoProgress'), WINDOW + 30)
    facts['fired'] = (fired, time.time() - stopped)
    # the others were at work meanwhile (samples left, progress): the alert is not theirs
    facts['others_at_fire'] = dict((name, (statuses(name)[SHARDS[name]]['state'], done(name))) for name in ('ct2', 'ct3'))
    mark('the no-progress alert fired')
    facts['server_up_while_stalled'] = query('up{job="sglang",host="ct1"}')
    ct('ct1', 'systemctl kill -s CONT %s' % (UNIT % 0))
    resumed = time.time()
    wait_for('EAGLE3ShardNoProgress to clear', lambda: not firing('EAGLE3ShardNoProgress'), WINDOW + 30)
    facts['cleared_after'] = time.time() - resumed
    mark('the alert cleared')

    # 4. the dashboard's queries, with every host and job chosen, while the job runs
    with open(DASHBOARD, encoding='utf-8') as f:
        dashboard = json.load(f)
    facts['dashboard'] = {}
    for panel in dashboard['panels']:
        for target in panel['targets']:
            expr = target['expr'].replace('$job', '.*').replace('$host', '.*')
            facts['dashboard'][expr] = prometheus('/api/v1/query', query=expr)

    # the end of the job: every shard complete, Prometheus's samples done equal to each status file's
    wait_for('every shard to complete', lambda: all(statuses(n).get(SHARDS[n], {}).get('state') == 'complete'
                                                    for n in CTS), 300, every=2)
    time.sleep(3)
    facts['final'] = (status_yml(tmp, 'status-final'),
                      by_host_shard('eagle3_job_samples_done{extraction_job="%s"}' % JOB))
    mark('the job completed')
    print('timings: %s' % timings, flush=True)
    # the test's Prometheus scrapes and evaluates every second: stopped, so that it does not load the fleet's later
    # tests (the online ones time a run)
    ct(MONITOR, 'systemctl stop prometheus')
    return facts


def test_prometheus_scrapes_every_container_labelled_with_its_host(scenario):
    jobs = dict((job['job_name'], sorted(c['labels']['host'] for c in job['static_configs']))
                for job in scenario['config']['scrape_configs'])
    assert jobs == {'eagle3-node': ['ct1', 'ct2', 'ct3'], 'sglang': ['ct1', 'ct2', 'ct3']}
    assert scenario['up'] == dict(((job, host), '1') for job in jobs for host in CTS)
    # one extract.yml made the job write its metrics into node_exporter's textfile dir: the variable alone
    for name, shard in SHARDS.items():
        assert 'eagle3_extraction_%s_shard%d.prom' % (JOB, shard) in scenario['metrics_files'][name]


def test_prometheus_has_the_samples_done_of_the_status_file_to_the_sample(scenario):
    in_status, in_prometheus = scenario['frozen']
    assert in_status > 0 and in_prometheus == in_status
    shown, prometheus_done = scenario['final']
    assert prometheus_done == dict((key, float(value)) for key, value in shown.items())
    assert sorted(shown) == sorted((name, SHARDS[name]) for name in CTS)
    assert sum(shown.values()) == SAMPLES


def test_a_stalled_shard_fires_the_no_progress_alert_within_its_window_and_it_clears(scenario):
    fired, after = scenario['fired']
    assert fired == {('ct1', '0')}
    others = scenario['others_at_fire']
    assert all(state == 'running' and 0 < count < SAMPLES // 3 for state, count in others.values()), others
    # the window, plus the scrape, the evaluation and the time the shard had been without a durable sample
    assert after <= WINDOW + 15
    # its server was healthy all along: the alert is about the job, not the server
    assert [s['value'][1] for s in scenario['server_up_while_stalled']] == ['1']
    assert scenario['cleared_after'] <= 20


def test_every_dashboard_query_returns_without_error(scenario):
    assert len(scenario['dashboard']) >= 10
    failed = dict((expr, answer) for expr, answer in scenario['dashboard'].items() if answer.get('status') != 'success')
    assert failed == {}
    empty = [expr for expr, answer in scenario['dashboard'].items()
             if 'eagle3_job_samples_done' in expr and not answer['data']['result']]
    assert empty == []
