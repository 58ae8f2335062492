"""The role monitoring's alert rules and Grafana dashboard, checked with Prometheus's own promtool (Debian's
prometheus package; lab/bootstrap/apt.sh installs it): the rules parse (promtool check rules), each alert fires on
series that reproduce its case and stays quiet on the others (promtool test rules,
tests/unit/fixtures/monitoring/alerts_test.yml), each names the host, the shard and what to run, and every
query of the dashboard parses. tests/integration/test_monitoring_fleet.py runs them against a real Prometheus."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.eagle3.extraction.plugins.plugin_utils import variables

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / 'roles' / 'monitoring'
TEMPLATE = ROLE / 'templates' / 'eagle3-alerts.yml.j2'
DASHBOARD = ROLE / 'files' / 'eagle3-dashboard.json'
UNIT_TESTS = REPO / 'tests' / 'unit' / 'fixtures' / 'monitoring' / 'alerts_test.yml'
PROMTOOL = shutil.which('promtool') or '/usr/bin/promtool'
# the windows alerts_test.yml's series are made for
WINDOWS = {'monitoring_no_progress_seconds': 600, 'monitoring_server_down_seconds': 60,
           'monitoring_shm_high_seconds': 120, 'monitoring_output_floor_seconds': 60,
           'monitoring_metrics_stale_seconds': 300}
# the dashboard's template variables, as Grafana puts them in with "All" chosen
DASHBOARD_VARIABLES = {'$job': '.*', '$host': '.*'}
# the alerts on a shard's series (the others are on a target's up)
SHARD_ALERTS = {'EAGLE3ShardNoProgress', 'EAGLE3ShmAboveHighWatermark', 'EAGLE3OutputDiskBelowFloor',
                'EAGLE3SamplesFailed', 'EAGLE3DatasetBadLines', 'EAGLE3JobMetricsStale'}


def promtool(*args, cwd=None):
    assert Path(PROMTOOL).is_file(), ('promtool is missing: it comes with Debian\'s prometheus package '
                                      '(apt-get install prometheus; lab/bootstrap/apt.sh installs it)')
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


def rendered(**values):
    """The rules file as the role writes it: its template (delimiters [[ ]]) with the role's defaults and values."""
    env = jinja2.Environment(variable_start_string='[[', variable_end_string=']]', undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    context = dict(variables.defaults('monitoring'), ansible_managed='Ansible managed')
    context.update(values)
    return env.from_string(TEMPLATE.read_text(encoding='utf-8')).render(context)


def alerts(text):
    return [rule for group in yaml.safe_load(text)['groups'] for rule in group['rules']]


@pytest.mark.parametrize('values', [{}, WINDOWS], ids=['defaults', 'short windows'])
def test_the_rules_pass_promtool_check_rules(tmp_path, values):
    path = tmp_path / 'eagle3-alerts.yml'
    path.write_text(rendered(**values), encoding='utf-8')
    result = promtool('check', 'rules', str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'SUCCESS: %d rules found' % len(alerts(path.read_text(encoding='utf-8'))) in result.stdout


def test_each_window_is_the_variable_given():
    by_name = dict((rule['alert'], rule) for rule in alerts(rendered(**WINDOWS)))
    assert '> 600)' in by_name['EAGLE3ShardNoProgress']['expr']
    assert by_name['EAGLE3ServerDown']['for'] == '60s'
    assert by_name['EAGLE3ShmAboveHighWatermark']['for'] == '120s'
    assert by_name['EAGLE3OutputDiskBelowFloor']['for'] == '60s'
    assert '> 300)' in by_name['EAGLE3JobMetricsStale']['expr']


def test_each_alert_fires_on_its_case_and_not_on_the_others(tmp_path):
    # promtool compares annotations whole: they are checked below, the expressions and windows here
    document = yaml.safe_load(rendered(**WINDOWS))
    for group in document['groups']:
        for rule in group['rules']:
            rule.pop('annotations')
    (tmp_path / 'eagle3-alerts.yml').write_text(yaml.safe_dump(document), encoding='utf-8')
    shutil.copy(UNIT_TESTS, tmp_path / 'alerts_test.yml')
    result = promtool('test', 'rules', 'alerts_test.yml', cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'SUCCESS' in result.stdout


def test_every_alert_has_a_firing_and_a_quiet_case():
    cases = [case for test in yaml.safe_load(UNIT_TESTS.read_text(encoding='utf-8'))['tests']
             for case in test['alert_rule_test']]
    names = set(rule['alert'] for rule in alerts(rendered()))
    assert names == set(case['alertname'] for case in cases if case['exp_alerts'])
    assert names == set(case['alertname'] for case in cases if not case['exp_alerts'])


def test_a_broken_case_fails_promtool_test_rules(tmp_path):
    # the check above can fail: an alert expected where its case does not reproduce it
    document = yaml.safe_load(UNIT_TESTS.read_text(encoding='utf-8'))
    document['tests'][0]['alert_rule_test'][0]['exp_alerts'] = document['tests'][0]['alert_rule_test'][1]['exp_alerts']
    (tmp_path / 'alerts_test.yml').write_text(yaml.safe_dump(document), encoding='utf-8')
    (tmp_path / 'eagle3-alerts.yml').write_text(rendered(**WINDOWS), encoding='utf-8')
    result = promtool('test', 'rules', 'alerts_test.yml', cwd=tmp_path)
    assert result.returncode != 0 and 'EAGLE3ShardNoProgress' in result.stdout + result.stderr


@pytest.mark.parametrize('rule', alerts(rendered()), ids=lambda rule: rule['alert'])
def test_each_alert_names_the_host_the_shard_and_what_to_run(rule):
    summary, description = rule['annotations']['summary'], rule['annotations']['description']
    assert '{{ $labels.host }}' in summary
    if rule['alert'] in SHARD_ALERTS:
        assert '{{ $labels.shard }}' in summary and '{{ $labels.shard }}' in description
    assert re.search(r'(status|extract|repair|verify|stop)\.yml', description), description
    assert rule['labels']['severity'] in ('critical', 'warning', 'info')


def dashboard_queries():
    document = json.loads(DASHBOARD.read_text(encoding='utf-8'))
    found = [target['expr'] for panel in document['panels'] for target in panel.get('targets', [])]
    return found + [variable['query']['query'] for variable in document['templating']['list']]


def grafana_free(expr):
    """The query as Prometheus gets it from Grafana with every host and job chosen."""
    for name, value in DASHBOARD_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def check_queries(tmp_path, queries):
    """promtool check rules on a recording rule for each query: Prometheus's own parser, the only one promtool
    runs on a bare expression."""
    rules = [{'record': 'eagle3:dashboard_query_%d' % i, 'expr': grafana_free(expr)} for i, expr in enumerate(queries)]
    path = tmp_path / 'dashboard-queries.yml'
    path.write_text(yaml.safe_dump({'groups': [{'name': 'dashboard', 'rules': rules}]}), encoding='utf-8')
    return promtool('check', 'rules', str(path))


def test_every_dashboard_query_parses(tmp_path):
    queries = [q for q in dashboard_queries() if not q.startswith('label_values(')]
    assert len(queries) >= 10
    result = check_queries(tmp_path, queries)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_query_that_does_not_parse_is_found(tmp_path):
    result = check_queries(tmp_path, ['sum by (host) (eagle3_job_samples_done{host=~"$host"}'])
    assert result.returncode != 0


def test_the_dashboard_covers_progress_rate_eta_shm_disk_and_failures():
    text = ' '.join(dashboard_queries())
    for series in ('eagle3_job_samples_done', 'eagle3_job_tokens_per_second', 'eagle3_job_eta_seconds',
                   'eagle3_job_shm_used_bytes', 'eagle3_job_output_free_bytes', 'eagle3_job_samples_failed',
                   'eagle3_job_bad_lines'):
        assert series in text
    # every query of a job series is narrowed by the dashboard's variables
    for expr in dashboard_queries():
        if 'eagle3_job_' in expr and not expr.startswith('label_values(eagle3_job_samples,'):
            assert 'host=~"$host"' in expr or '$job' in expr, expr
