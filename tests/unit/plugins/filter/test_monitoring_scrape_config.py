"""filter monitoring_scrape_config: prometheus.yml's content from every host's plan, and the refusal of anything else."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.monitoring_scrape_config import monitoring_scrape_config
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import plan


def test_the_config_and_the_hosts_it_cannot_reach():
    fleet = {'ct1': {'ansible_host': '10.0.0.1', 'sglang_server_host': '0.0.0.0', 'monitoring_prometheus_host': 'ct1'},
             'ct2': {'ansible_host': '10.0.0.9', 'ansible_connection': 'community.proxmox.proxmox_pct_remote',
                     'proxmox_container_node': 'pve1', 'proxmox_vmid': 102, 'monitoring_prometheus_host': 'ct1'}}
    found = monitoring_scrape_config(dict((h, plan(fleet, h)) for h in fleet), '/etc/prometheus/eagle3/a.yml', '2', 1)
    assert found['unreachable'] == ['ct2']
    assert found['config']['global']['scrape_interval'] == '2s'
    assert [job['job_name'] for job in found['config']['scrape_configs']] == ['eagle3-node', 'sglang']


def test_no_plans_is_refused():
    with pytest.raises(AnsibleFilterError, match='every host'):
        monitoring_scrape_config(['ct1'], '/r.yml', 15, 15)
