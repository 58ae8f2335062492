# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's variable records (plugin_utils/role_variables/<role>.py), and what is computed from them.

The one place controller code learns what a role variable is: its argument spec (the role's
meta/argument_specs.yml is made from the same records), its default, its rule, whether the host's
plan reads it, whether every node of a multi-node server must agree on it, the SGLang flag it is.
"""

from __future__ import annotations

import copy

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_variables import (
    extraction_job, gpu_check, ml_env, monitoring, mooncake_master, online_training, proxmox_container, sglang_patch,
    sglang_server)

# the roles in the order a container is brought up; then the online mode's own hosts: its store
# (mooncake_master) and its trainer (online_training); then what watches them all (monitoring)
ROLES = ('proxmox_container', 'gpu_check', 'ml_env', 'sglang_patch', 'sglang_server', 'extraction_job',
         'mooncake_master', 'online_training', 'monitoring')
_MODULES = dict((module.ROLE, module) for module in (
    proxmox_container, gpu_check, ml_env, sglang_patch, sglang_server, extraction_job, mooncake_master,
    online_training, monitoring))
AUTHOR = 'eagle3.extraction maintainers'


def records(role):
    """The role's Variable records, in their declared order."""
    return _MODULES[role].VARIABLES


def defaults_header(role):
    """The comment lines at the top of the role's defaults/main.yml."""
    return _MODULES[role].DEFAULTS_HEADER


def _all():
    found = {}
    for role in ROLES:
        for variable in records(role):
            found[variable.name] = variable
    return found


BY_NAME = _all()
# the roles' variables that every node of a multi-node server must hold the same
SAME_ON_EVERY_NODE = tuple(name for name, variable in BY_NAME.items() if variable.same_on_every_node)
# the host's plan reads these of its own host, and PEER_READ of the other hosts too
PLAN_READ = tuple(name for name, variable in BY_NAME.items() if variable.plan)
PEER_READ = tuple(name for name, variable in BY_NAME.items() if variable.peer)
# {SGLang flag: the variable that alone sets it}
FLAG_VARIABLES = dict((variable.flag, name) for name, variable in BY_NAME.items() if variable.flag)
SECRETS = frozenset(name for name, variable in BY_NAME.items() if variable.no_log)


def rule_error(name, value, shown=None):
    """The message of the variable's own rule (its record's) when value breaks it, else None: ``<name>=<value> is
    <reason>; give <what>``, a secret's value hidden. shown: the value as given, when value is its conversion. The one
    wording of a refused value: role_inputs' checks (the inventory check, each role's first check) and every reader
    of a variable outside them (the host's plan) name it so."""
    variable = BY_NAME[name]
    reason = variable.rule.check(value) if variable.rule else None
    if not reason:
        return None
    if variable.rule.whole_message:
        return reason
    return '%s=%s is %s; give %s' % (name, '(hidden)' if variable.no_log else show(value if shown is None else shown),
                                     reason, variable.rule.what)


def role_of(name):
    """The role a variable belongs to (its name's prefix, as its record's module)."""
    for role in ROLES:
        if any(variable.name == name for variable in records(role)):
            return role
    raise KeyError(name)


def argument_specs(role):
    """The role's meta/argument_specs.yml document ({'argument_specs': {entry point: ...}}), made from its
    records: the main entry point's options are every record; another entry point takes them all, or some with
    the spec keys it states differently."""
    by_name = dict((variable.name, variable) for variable in records(role))
    main = dict((variable.name, variable.spec()) for variable in records(role))
    document = {}
    for entry in _MODULES[role].ENTRY_POINTS:
        point = {'short_description': entry.short_description}
        if entry.description:
            point['description'] = entry.description
        point['author'] = [AUTHOR]
        if entry.options == 'main':
            point['options'] = main
        else:
            point['options'] = dict((name, by_name[name].spec(**changes) if changes else main[name])
                                    for name, changes in entry.options.items())
        document[entry.name] = point
    return {'argument_specs': document}


_OPTIONS = {}


def options(role):
    """The options of the role's main entry point ({name: argument spec}), made once a process. Shared: a caller
    that changes them copies them first (role_inputs.load_specs does)."""
    if role not in _OPTIONS:
        _OPTIONS[role] = dict((variable.name, variable.spec()) for variable in records(role))
    return _OPTIONS[role]


def defaults(role):
    """{name: default} of the role's variables that have one: its defaults/main.yml."""
    return dict((variable.name, copy.deepcopy(variable.default)) for variable in records(role) if variable.has_default)
