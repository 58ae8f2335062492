# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rollout_table: the table extract.yml prints at its end, computed from what each host's play
left (``__extract_result``) and inventory_check's plans, and rendered by the collection's
one table renderer (module_utils/text_table.py), the status table's too."""

from __future__ import annotations

DOCUMENTATION = r'''
name: rollout_table
short_description: The rollout table of extract.yml, from the hosts' results
version_added: 0.1.0
description:
  - One row per SGLang server (a multi-node server's nodes in one cell, in rank order) with its VMID@HYPERVISOR of
    each node, GPUs, driver, the URL the controller calls (inventory_check's C(plans), placed as it is), health
    and run (V(applied), V(unchanged), V(failed) or V(-)); then C(N of M servers healthy); then, for each host whose
    extraction job was (re)started in this run, C(job of <host>:) and each shard's start (C(shard-0 sending),
    C(shard-1 paused (output disk full ...)), C(shard-2 refused (why))); then one C(FAILED) line per host that did not
    come up, with the task and cause its play kept (its whitespace, newlines included, as
    single spaces, one line per host), or why it has no result.
  - A host without C(__extract_result) whose server's nodes all have none and were all converged at the start
    (C(__extract_converged); the rule of the filter C(rollout_converged), by which extract.yml ends their play)
    is V(healthy) and V(unchanged), with the GPUs and driver its stamp recorded; any other host without
    C(__extract_result) is V(UNREACHABLE) (not reached over SSH, or the rollout stopped before it).
  - Runs on the controller, like every filter.
extends_documentation_fragment:
  - eagle3.extraction.filter_hostvars
  - eagle3.extraction.filter_hostvars.extraction_servers
options:
  plans:
    description:
      - inventory_check's C(plans) (plugins/plugin_utils/host_plan.py), each host's server layout and address
        (C(controller_url) among them) in it.
      - "A server reached through pct whose C(controller_url) is null shows C(via <hypervisor>: <client_url>)."
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Print the rollout table
  ansible.builtin.debug:
    msg: "{{ groups['extraction_servers'] | eagle3.extraction.rollout_table(hostvars, __extract_inventory.plans) }}"
'''

RETURN = r'''
_value:
  description: The table's lines, the summary line and the C(FAILED) lines, joined by newlines.
  type: str
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.module_utils.text_table import table_lines
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import through_pct
from ansible_collections.eagle3.extraction.plugins.plugin_utils.rollout_hosts import (
    CONVERGED, RESULT, converged, host_values)

HEADER = ['SERVER', 'VMID@HYPERVISOR', 'GPUS', 'DRIVER', 'URL', 'HEALTH', 'RUN']
NOT_REACHED = {'health': 'UNREACHABLE', 'run': '-'}
NOT_REACHED_CAUSE = 'unreachable %s, or the rollout stopped before it (extract_max_fail_percentage)'


def unique(values):
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def result_of(hosts, name):
    """What the host's play left: its result, or "unchanged" for a converged server, or not reached."""
    values = hosts[name]
    if values.get(RESULT):
        return values[RESULT]
    if converged(hosts, name):
        stamp = values[CONVERGED].get('stamp') or {}
        return {'health': 'healthy', 'run': 'unchanged', 'gpus': stamp.get('gpus', '-'),
                'driver': stamp.get('driver', '-')}
    return NOT_REACHED


def server_row(server, hosts, plans):
    """One server's row from its nodes' values (rank order)."""
    nodes = [hosts[name] for name in server['nodes']]
    results = [result_of(hosts, name) for name in server['nodes']]
    healths = [result.get('health') for result in results]
    runs = unique(result.get('run') for result in results)
    if healths == ['healthy'] * len(healths):
        health = 'healthy'
    else:
        health = 'FAILED' if 'FAILED' in healths else 'UNREACHABLE'
    if len(runs) == 1:
        run = runs[0]
    else:
        run = 'failed' if 'failed' in runs else 'applied'
    name = server['name'] if server['nnodes'] == 1 else '%s (%s)' % (server['name'], ', '.join(server['nodes']))
    return [name,
            ', '.join('%s@%s' % (node.get('proxmox_container_vmid', '?'), node.get('proxmox_container_node', '?'))
                      for node in nodes),
            ' + '.join(str(result.get('gpus', '-')) for result in results),
            ', '.join(unique(str(result.get('driver', '-')) for result in results)),
            server_url(plans[server['rank0']]['server']['address']),
            health, run]


def server_url(address):
    """The URL the controller calls; for a server reached through pct (no URL the controller can call),
    the one its own container calls, behind the hypervisor that reaches it."""
    if address.get('controller_url'):
        return address['controller_url']
    if address.get('via'):
        return 'via %s: %s' % (address['via'], address.get('client_url', '-'))
    return '-'


def one_line(text):
    """A cause copied from a command's output keeps its words, on one line: a reader takes each
    FAILED line as one host."""
    return ' '.join(str(text).split())


def failure_line(name, result, values):
    if result.get('cause') is not None:
        return 'FAILED %s: failed in %s: %s' % (name, one_line(result.get('task', '?')), one_line(result['cause']))
    how = 'through pct on %s' % values.get('proxmox_container_node', '?') if through_pct(values) else 'over SSH'
    return 'FAILED %s: %s' % (name, NOT_REACHED_CAUSE % how)


def shard_starts(shards):
    """A host's shards as extraction_job_outcome left them, on one line: ``shard-0 sending, shard-1 paused (...)``."""
    return ', '.join('%s %s%s' % (shard.get('shard', '?'), shard.get('outcome', '?'),
                                  ' (%s)' % one_line(shard['error']) if shard.get('error') else '')
                     for shard in shards)


def rollout_lines(hosts, plans):
    """``hosts``: ``{host: {variable: value}}`` in inventory order (READ's variables that are set); ``plans``:
    inventory_check's, ``{host: plan}``."""
    rows = [HEADER]
    failures = []
    starts = []
    for name, values in hosts.items():
        result = result_of(hosts, name)
        if result.get('health') != 'healthy':
            failures.append(failure_line(name, result, values))
        if result.get('job'):
            starts.append('job of %s: %s' % (name, shard_starts(result['job'])))
        server = plans[name]['server']['layout']
        if server['rank'] == 0:
            rows.append(server_row(server, hosts, plans))
    healthy = len([row for row in rows[1:] if row[5] == 'healthy'])
    return table_lines(rows) + ['%d of %d servers healthy' % (healthy, len(rows) - 1)] + starts + failures


def rollout_table(hosts, hostvars, plans):
    try:
        values = host_values(hosts, hostvars)
    except ValueError as exc:
        raise AnsibleFilterError('rollout_table: %s' % exc) from None
    if not isinstance(plans, dict) or not all(host in plans for host in hosts):
        raise AnsibleFilterError("rollout_table: plans must be inventory_check's plans, a dict with every host's")
    return '\n'.join(rollout_lines(values, plans))


class FilterModule(object):
    def filters(self):
        return {'rollout_table': rollout_table}
