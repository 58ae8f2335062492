# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""inventory_check: every container's values against the roles' argument specs and rules,
the rules across hosts and the rollout's, on the controller, before any host is touched; then,
for a valid inventory, each host's plan (plugin_utils/host_plan.py), which the rollout table and
extract.yml's host play read."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleUndefinedVariable

from ansible_collections.eagle3.extraction.plugins.plugin_utils.controller_check import ControllerCheck
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import READ as CONNECTION_READ
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import connection_errors
from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_inputs import (
    cross_host_errors, host_value_errors, inventory_host_errors, load_specs, rollout_errors)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import PlanError, plan
from ansible_collections.eagle3.extraction.plugins.plugin_utils import online_plan
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import ansible_host_error
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import layout_errors


class ActionModule(ControllerCheck):
    ARGUMENT_SPEC = {
        'hosts': {'type': 'list', 'elements': 'str', 'required': True},
        'hypervisors': {'type': 'list', 'elements': 'str', 'required': True},
        # the online mode's hosts by group (online_plan.GROUPS): the Mooncake masters and the trainers
        'online': {'type': 'dict', 'default': {}},
        'rollout': {'type': 'dict', 'default': {}, 'options': {
            'extract_serial': {'type': 'raw', 'default': '100%'},
            'extract_max_fail_percentage': {'type': 'raw', 'default': 100},
            'extract_reclaim': {'type': 'raw', 'default': True},
            'extract_force': {'type': 'raw', 'default': False},
        }},
    }

    def check(self, args, task_vars, result):
        hostvars = task_vars['hostvars']
        specs = load_specs()
        names = set(name for options in specs.values() for name in options)
        errors, values, unresolved = [], {}, []
        if not args['hosts']:
            errors.append('the inventory has no host in the extraction_servers group')
        for host in args['hosts']:
            values[host] = _values(host, hostvars, names, unresolved, errors)
            errors.extend('%s: %s' % (host, error) for error in host_value_errors(specs, values[host]))
            errors.extend(inventory_host_errors(host, values[host], hostvars))
        errors.extend(cross_host_errors(values, args['hypervisors']))
        online = {}
        for group in online_plan.GROUPS:
            online[group] = {}
            for host in (args['online'] or {}).get(group) or []:
                own = values[host] if host in values else _values(host, hostvars, names, unresolved, errors)
                if host not in values:
                    errors.extend('%s: %s' % (host, error) for error in host_value_errors(specs, own))
                online[group][host] = own
        rollout = args['rollout'] or {}
        errors.extend(layout_errors(values, rollout.get('extract_serial', '100%')))
        errors.extend(rollout_errors(rollout.get('extract_serial', '100%'),
                                     rollout.get('extract_max_fail_percentage', 100),
                                     rollout.get('extract_reclaim', True), rollout.get('extract_force', False)))
        reached = _with_connection(values, hostvars)
        errors.extend(_connection_errors(reached, hostvars))
        online = dict((group, _with_connection(members, hostvars)) for group, members in online.items())
        errors.extend(_address_errors(reached, online))
        errors.extend(online_plan.errors(reached, online))
        plans = {}
        if not errors:
            plans, errors = _plans(reached, online)
        result.update(changed=False, hosts=len(args['hosts']), unresolved=unresolved, plans=plans,
                      online=online_plan.in_use(reached, online) if not errors else {},
                      dataset_hosts=_dataset_hosts(args['hosts'], values, unresolved))
        if errors:
            result.update(failed=True, errors=errors,
                          msg='the inventory is not valid; nothing was changed:\n' + '\n'.join(errors))
        else:
            result['msg'] = '%d containers checked' % len(args['hosts'])
        return result


def _dataset_hosts(hosts, values, unresolved):
    """The hosts given a dataset (extraction_job_dataset set, or a template not resolved yet) in the files mode:
    extract.yml's dataset play runs on them alone (the online mode has none: the producer owns the dataset)."""
    return [host for host in hosts
            if (values[host].get('extraction_job_dataset') or '%s - extraction_job_dataset' % host in unresolved)
            and online_plan.mode(values[host]) != 'online']


def _values(host, hostvars, names, unresolved, errors):
    """The host's values of the roles' variables that it sets."""
    found = {}
    host_vars = hostvars[host]
    for name in sorted(names):
        if name not in host_vars:
            continue
        try:
            found[name] = host_vars[name]
        except AnsibleUndefinedVariable:
            # refers to a fact a role sets later (ml_env_python_bin...): checked when the role starts
            unresolved.append('%s - %s' % (host, name))
        except AnsibleError as exc:
            errors.append('%s: %s cannot be read: %s' % (host, name, exc.message))
    return found


def _plans(seen, online):
    """{host: its plan} of every host (the servers', then the online mode's own hosts'), and the messages of those
    that have none.

    Asked only of an inventory the rules above passed, so that a bad port is named once; what they
    let through and no plan can be made of (a host that is not an address) is named here.
    """
    plans, errors = {}, []
    for host in list(seen) + sorted(set(h for members in online.values() for h in members) - set(seen)):
        try:
            plans[host] = plan(seen, host, online)
        except PlanError as exc:
            errors.append(str(exc))
    return plans, errors


def _with_connection(values, hostvars):
    """Each host's values with how it is reached (ansible_host, ansible_connection, proxmox_vmid)."""
    seen = {}
    for host, own in values.items():
        seen[host] = dict(own)
        seen[host].update((key, hostvars[host][key]) for key in CONNECTION_READ if key in hostvars[host])
    return seen


def _address_errors(reached, online):
    """Each host's ansible_host, where set, is an address or host name: the rule the host's plan applies where it
    reads one (server_address.ansible_host_error), asked of every host so that none passes here and fails later."""
    seen = dict(reached)
    for members in online.values():
        seen.update(members)
    return ['%s: %s' % (host, error) for host, error in
            ((host, ansible_host_error(host, own)) for host, own in sorted(seen.items())
             if own.get('ansible_host') not in (None, '')) if error]


def _connection_errors(reached, hostvars):
    """A container reached through pct whose plugin would reach another container (pct_connection.py)."""
    errors = []
    for host, own in reached.items():
        node = own.get('proxmox_container_node')
        if not isinstance(node, str) or node not in hostvars:
            continue   # cross_host_errors names it
        errors.extend(connection_errors(host, own, hostvars[node].get('ansible_host') or node))
    return errors
