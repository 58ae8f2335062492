# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Prometheus scrapes, from the host plans: the one owner of the monitoring role's targets.

A server's plan has a ``monitoring`` section (section(), None while monitoring is off): where its node_exporter is
reached and its SGLang's /metrics (rank 0 of a server, which serves HTTP), and the textfile dir its job writes its
metrics to. scrape_config() makes the monitoring host's prometheus.yml of every host's plan (extract.yml's
inventory check makes them all): the scrape jobs ``eagle3-node``, ``sglang`` and ``mooncake-master``, each target
labelled ``host=<inventory_hostname>``, which the alert rules join on.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import reached_at
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import host_port, loopback
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

ROLE = 'monitoring'
# the scrape jobs: the alert rules and the dashboard name them
NODE_JOB = 'eagle3-node'
SGLANG_JOB = 'sglang'
MOONCAKE_JOB = 'mooncake-master'


def _given(values, name):
    return values[name] if name in values else spec_defaults(ROLE, (name,))[name]


def section(host, values, server):
    """The ``monitoring`` part of a server's plan, None while monitoring_prometheus_host is empty.

    ``values``: the host's (the plan's READ); ``server``: its plan's ``server``. ``node_exporter``: where Prometheus
    reaches its node_exporter (None for a container reached through pct: it has no address of its own in the
    inventory); ``sglang``: its server's /metrics target on rank 0, when the server binds an address beyond its
    container (a loopback bind cannot be scraped from another host); ``textfile_dir``: where its job writes its
    metrics.
    """
    if not _given(values, 'monitoring_prometheus_host'):
        return None
    address = reached_at(host, values)
    sglang = None
    if server['layout']['rank'] == 0 and not loopback(server['address']['host']):
        where = urlsplit(server['address']['controller_url'] or '')
        if where.hostname:
            sglang = host_port(where.hostname, where.port)
    return {
        'prometheus_host': _given(values, 'monitoring_prometheus_host'),
        'textfile_dir': _given(values, 'monitoring_textfile_dir'),
        'node_exporter': host_port(address, int(_given(values, 'monitoring_node_exporter_port'))) if address else None,
        'sglang': sglang,
    }


def _static(target, host):
    return {'targets': [target], 'labels': {'host': host}}


def scrape_config(plans, rules_file, scrape_interval, evaluation_interval):
    """prometheus.yml's content ({...}) from ``plans`` ({host: plan}, every host's), and the servers Prometheus
    cannot reach (their plan has no node_exporter address: reached through pct), as (config, unreachable)."""
    node, sglang, mooncake, unreachable = [], [], {}, []
    for host in sorted(plans):
        plan = plans[host] or {}
        own = plan.get('monitoring')
        if own:
            if own['node_exporter']:
                node.append(_static(own['node_exporter'], host))
            else:
                unreachable.append(host)
            if own['sglang']:
                sglang.append(_static(own['sglang'], host))
        master = (plan.get('online') or {}).get('master')
        if master and master.get('metrics_url'):
            where = urlsplit(master['metrics_url'])
            mooncake[master['host']] = _static(host_port(where.hostname, where.port), master['host'])
    jobs = [{'job_name': NODE_JOB, 'static_configs': node}]
    if sglang:
        jobs.append({'job_name': SGLANG_JOB, 'static_configs': sglang})
    if mooncake:
        jobs.append({'job_name': MOONCAKE_JOB, 'static_configs': [mooncake[name] for name in sorted(mooncake)]})
    config = {
        'global': {'scrape_interval': '%ds' % scrape_interval, 'evaluation_interval': '%ds' % evaluation_interval},
        'rule_files': [rules_file],
        'scrape_configs': jobs,
    }
    return config, unreachable
