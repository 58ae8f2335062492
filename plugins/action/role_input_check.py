# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""role_input_check: one role's variables, as this host sees them (its defaults included),
against the rules its argument spec cannot hold; a role's first task, before it changes anything."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleUndefinedVariable

from ansible_collections.eagle3.extraction.plugins.plugin_utils.controller_check import ControllerCheck
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import PlanError, task_plan
from ansible_collections.eagle3.extraction.plugins.plugin_utils.mooncake_address import READ as MOONCAKE_READ
from ansible_collections.eagle3.extraction.plugins.plugin_utils.mooncake_address import advertised
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import READ as CONNECTION_READ
from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import connection_errors, through_pct
from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_inputs import (
    ACROSS_NAMES, ROLES, across_role_errors, inventory_host_errors, load_specs, required_errors, role_value_errors)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_address import ansible_host_error, exposure_warning
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import AddressError


# the roles that build the job's wheel once on the controller for every host (run_once): the free strategies run a
# run_once task for each host at its own time, each registering its result for every host, so one host's build dir
# is taken for another's and removed under its build
BUILD_ONCE_ROLES = ('extraction_job', 'online_training')
FREE_STRATEGIES = ('free', 'host_pinned', 'mitogen_free', 'mitogen_host_pinned')


class ActionModule(ControllerCheck):
    ARGUMENT_SPEC = {'role': {'type': 'str', 'required': True, 'choices': list(ROLES)}}

    def check(self, args, task_vars, result):
        role = args['role']
        specs = load_specs()
        options = specs[role]
        values, unresolved, errors = {}, [], []
        # the variables of another role a rule of this one compares with (the server's dump dir), when the play has them
        for name in sorted(set(options) | ACROSS_NAMES):
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleUndefinedVariable:
                unresolved.append(name)
            except AnsibleError as exc:
                errors.append('%s cannot be read: %s' % (name, exc.message))
        errors.extend(required_errors(values, [name for name in options if name not in unresolved]))
        errors.extend(role_value_errors(options, values))
        errors.extend(across_role_errors(specs, values, defaults=False))
        errors.extend(self._ansible_host_errors(task_vars))
        if role in BUILD_ONCE_ROLES:
            errors.extend(self._strategy_errors(role))
        # what a role's check reads beyond its own variables: the inventory, the host's plan
        beyond = {'gpu_check': self._hypervisor_errors, 'sglang_server': self._address_errors,
                  'proxmox_container': self._connection_errors, 'mooncake_master': self._mooncake_errors}.get(role)
        if beyond:
            errors.extend(beyond(values, task_vars, result, errors))
        result.update(changed=False, unresolved=unresolved)
        if errors:
            result.update(failed=True, errors=errors,
                          msg='%s: nothing was changed; fix these values:\n%s' % (role, '\n'.join(errors)))
        else:
            result['msg'] = '%s: %d values checked' % (role, len(values))
        return result

    def _strategy_errors(self, role):
        """The play's strategy, when it is a free one: the role's wheel build (run_once) is not safe under it."""
        try:
            strategy = self._task.get_play().strategy
        except AttributeError:   # a task outside a play (a test's): nothing to say
            return []
        if not isinstance(strategy, str) or strategy.rsplit('.', 1)[-1] not in FREE_STRATEGIES:
            return []
        return ["%s cannot run under strategy: %s (the play's): it builds the job's wheel once on the controller for "
                "every host (run_once), which that strategy runs for each host at its own time, so one host's build "
                "dir is removed under another's build. Run this play with strategy: linear (the default)"
                % (role, strategy)]

    def _ansible_host_errors(self, task_vars):
        """This host's ansible_host, where set, is an address or host name, as inventory_check asks of every host."""
        if task_vars.get('ansible_host') in (None, ''):
            return []
        try:
            found = self._templar.template(task_vars['ansible_host'])
        except AnsibleError as exc:
            return ['ansible_host cannot be read: %s' % exc.message]
        error = ansible_host_error(task_vars['inventory_hostname'], {'ansible_host': found})
        return [error] if error else []

    def _hypervisor_errors(self, values, task_vars, result, errors):
        """gpu_check_hypervisor names a host of the inventory, as inventory_check says."""
        del result, errors
        return inventory_host_errors(task_vars['inventory_hostname'], values, task_vars.get('hostvars', {}))

    def _address_errors(self, values, task_vars, result, errors):
        """The address the server will listen on, from this host's plan (made as the lookup host_plan makes it for
        the role's tasks): an error naming the variable and its value when no plan can be made; a warning when the
        server listens beyond its container without an API key. Not asked when a value was refused already: no plan
        is made of it."""
        if errors:
            return []
        try:
            host_plan = task_plan(task_vars, self._templar.template)
        except PlanError as exc:
            return [str(exc)]
        except AnsibleError as exc:
            return [exc.message]
        warning = exposure_warning(host_plan['server']['address'], values.get('sglang_server_api_key'))
        if warning:
            result['warnings'] = ['sglang_server: ' + warning]
        return []

    def _mooncake_errors(self, values, task_vars, result, errors):
        """The address the master will advertise (plugin_utils/mooncake_address.py), when every value passed."""
        del result
        if errors:
            return []
        seen = dict(values)
        for key in MOONCAKE_READ:
            if key in task_vars and key not in seen:
                seen[key] = self._templar.template(task_vars[key])
        try:
            advertised(task_vars['inventory_hostname'], seen)
        except AddressError as exc:
            return [str(exc)]
        return []

    def _connection_errors(self, values, task_vars, result, errors):
        """That the node is a host of the inventory, and how the container is reached (its connection, ansible_host,
        proxmox_vmid) against its node and vmid: the container's role, the first to run on it, checks it as
        inventory_check does. Tells the role whether the container is reached through pct."""
        del errors
        result['through_pct'] = through_pct(task_vars)
        node = values.get('proxmox_container_node')
        hostvars = task_vars.get('hostvars', {})
        if not isinstance(node, str) or node not in hostvars:
            # the inventory, not a value: the role's tasks run on the node
            return ['%s: proxmox_container_node=%r is not a host of the inventory; set it to the inventory name of the '
                    "container's Proxmox node." % (task_vars['inventory_hostname'], node)]
        seen = dict(values)
        for key in CONNECTION_READ:
            if key in task_vars:
                seen[key] = self._templar.template(task_vars[key])
        return connection_errors(task_vars['inventory_hostname'], seen,
                                 self._templar.template(hostvars[node].get('ansible_host')) or node)
