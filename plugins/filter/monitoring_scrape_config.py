# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""monitoring_scrape_config: the monitoring host's prometheus.yml, made from every host's plan
(plugin_utils/monitoring_plan.py)."""

from __future__ import annotations

DOCUMENTATION = r'''
name: monitoring_scrape_config
short_description: Prometheus's configuration for the extraction job, made from the host plans
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - The scrape jobs C(eagle3-node) (each extraction server's node_exporter, whose textfile collector serves the job's
    metrics), C(sglang) (each server's C(/metrics) on rank 0, where it binds beyond its container) and
    C(mooncake-master) (the online mode's master), every target labelled C(host=<inventory_hostname>); the global
    intervals and the rules file.
  - The targets are the plans' C(monitoring) sections (plugins/plugin_utils/monitoring_plan.py), which extract.yml's
    inventory check makes for every host; a host whose plan has none (monitoring off) is left out.
positional: _input, rules_file, scrape_interval, evaluation_interval
options:
  _input:
    description: Every host's plan by its inventory name (M(eagle3.extraction.inventory_check)'s C(plans)).
    type: dict
    required: true
  rules_file:
    description: The alert rules file's absolute path on the monitoring host.
    type: str
    required: true
  scrape_interval:
    description: Seconds between two scrapes.
    type: int
    required: true
  evaluation_interval:
    description: Seconds between two rule evaluations.
    type: int
    required: true
'''

EXAMPLES = r'''
- name: Write prometheus.yml
  ansible.builtin.copy:
    content: "{{ (plans | eagle3.extraction.monitoring_scrape_config('/etc/prometheus/eagle3/eagle3-alerts.yml', 15,
      15)).config | to_nice_yaml(indent=2) }}"
    dest: /etc/prometheus/prometheus.yml
    mode: "0644"
    validate: promtool check config %s
'''

RETURN = r'''
_value:
  description: C(config), prometheus.yml's content; C(unreachable), the servers Prometheus cannot reach (a container
    reached through pct has no address of its own in the inventory).
  type: dict
'''

from ansible.errors import AnsibleFilterError
from ansible_collections.eagle3.extraction.plugins.plugin_utils.monitoring_plan import scrape_config


def monitoring_scrape_config(plans, rules_file, scrape_interval, evaluation_interval):
    if not isinstance(plans, dict):
        raise AnsibleFilterError('monitoring_scrape_config: give every host\'s plan ({host: plan}), not %r'
                                 % type(plans).__name__)
    config, unreachable = scrape_config(plans, rules_file, int(scrape_interval), int(evaluation_interval))
    return {'config': config, 'unreachable': unreachable}


class FilterModule(object):
    def filters(self):
        return {'monitoring_scrape_config': monitoring_scrape_config}
