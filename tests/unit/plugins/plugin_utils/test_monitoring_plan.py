"""plugin_utils/monitoring_plan.py: what Prometheus scrapes of each host (its plan's ``monitoring`` section) and the
prometheus.yml made of every host's plan: every extraction server's node_exporter, each server's SGLang /metrics on
rank 0 where it binds beyond loopback, the online mode's master, each target labelled host=<inventory_hostname>."""

from __future__ import annotations

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import plan
from ansible_collections.eagle3.extraction.plugins.plugin_utils.monitoring_plan import scrape_config

ON = {'monitoring_prometheus_host': 'ct3'}
FLEET = {
    # a wildcard bind: scraped at its ansible_host
    'ct1': dict(ON, ansible_host='10.0.0.1', sglang_server_host='0.0.0.0'),
    # the default loopback bind: no sglang target (another host cannot reach it)
    'ct2': dict(ON, ansible_host='10.0.0.2', monitoring_node_exporter_port=9200),
    # a real IPv6 address
    'ct3': dict(ON, ansible_host='10.0.0.3', sglang_server_host='fd00::3', sglang_server_port=8100),
    # a two-node server: its rank 0 (ct4) serves HTTP; ct5 only its node_exporter
    'ct4': dict(ON, ansible_host='10.0.0.4', sglang_server_name='duo', sglang_server_node_rank=0,
                sglang_server_host='0.0.0.0', sglang_server_tp_size=16),
    'ct5': dict(ON, ansible_host='10.0.0.5', sglang_server_name='duo', sglang_server_node_rank=1,
                sglang_server_host='0.0.0.0', sglang_server_tp_size=16),
    # reached through its hypervisor: no address of its own
    'ct6': dict(ON, ansible_host='10.0.0.250', ansible_connection='community.proxmox.proxmox_pct_remote',
                proxmox_container_node='pve1', proxmox_vmid=106),
}


def plans(fleet=None):
    fleet = fleet or FLEET
    return dict((host, plan(fleet, host)) for host in fleet)


def test_monitoring_is_off_until_the_host_is_named():
    assert plan({'ct1': {'ansible_host': '10.0.0.1'}}, 'ct1')['monitoring'] is None
    assert plan({'ct1': {'ansible_host': '10.0.0.1', 'monitoring_prometheus_host': ''}}, 'ct1')['monitoring'] is None


@pytest.mark.parametrize('host, node, sglang', [
    ('ct1', '10.0.0.1:9100', '10.0.0.1:8000'), ('ct2', '10.0.0.2:9200', None), ('ct3', '10.0.0.3:9100', '[fd00::3]:8100'),
    ('ct4', '10.0.0.4:9100', '10.0.0.4:8000'), ('ct5', '10.0.0.5:9100', None), ('ct6', None, None)])
def test_each_hosts_targets(host, node, sglang):
    found = plans()[host]['monitoring']
    assert (found['node_exporter'], found['sglang']) == (node, sglang)
    assert found['textfile_dir'] == '/var/lib/prometheus/node-exporter'
    assert found['prometheus_host'] == 'ct3'


def test_the_scrape_config_labels_each_target_with_its_host():
    config, unreachable = scrape_config(plans(), '/etc/prometheus/eagle3/eagle3-alerts.yml', 2, 1)
    assert config['global'] == {'scrape_interval': '2s', 'evaluation_interval': '1s'}
    assert config['rule_files'] == ['/etc/prometheus/eagle3/eagle3-alerts.yml']
    jobs = dict((job['job_name'], [(s['targets'], s['labels']) for s in job['static_configs']])
                for job in config['scrape_configs'])
    assert jobs == {
        'eagle3-node': [(['10.0.0.%d:%d' % (i, 9200 if i == 2 else 9100)], {'host': 'ct%d' % i}) for i in range(1, 6)],
        'sglang': [(['10.0.0.1:8000'], {'host': 'ct1'}), (['[fd00::3]:8100'], {'host': 'ct3'}),
                   (['10.0.0.4:8000'], {'host': 'ct4'})],
    }
    assert unreachable == ['ct6']


def test_the_online_masters_metrics_are_scraped_once():
    master = {'host': 'ct9', 'metrics_url': 'http://10.0.0.9:35903'}
    found = dict((host, {'monitoring': None, 'online': {'master': master}}) for host in ('ct1', 'ct2'))
    config, dummy = scrape_config(found, '/r.yml', 15, 15)
    assert config['scrape_configs'][-1] == {'job_name': 'mooncake-master', 'static_configs': [
        {'targets': ['10.0.0.9:35903'], 'labels': {'host': 'ct9'}}]}


@pytest.mark.parametrize('values, expected', [
    ({}, ''),
    (ON, '/var/lib/prometheus/node-exporter'),
    (dict(ON, monitoring_textfile_dir='/srv/textfiles'), '/srv/textfiles'),
    # the user's own dir stands, monitoring on or off
    ({'extraction_job_metrics_dir': '/srv/metrics'}, '/srv/metrics'),
    (dict(ON, extraction_job_metrics_dir='/srv/metrics'), '/srv/metrics')])
def test_the_job_writes_its_metrics_where_node_exporter_reads_them_while_monitoring_is_on(values, expected):
    assert plan({'ct1': dict(values, ansible_host='10.0.0.1')}, 'ct1')['job']['metrics_dir'] == expected
