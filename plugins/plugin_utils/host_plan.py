# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host's resolved plan: the one owner of every fact the inventory decides for a host.

What its server will run (its flags and environment as the unit and config file hold them, the port
and host it binds, the URLs a client on the host and the controller call, its tensor-parallel size
here and over its nodes, its multi-node layout, its unit, its dump dir, what a leftover of it looks
like), the venv's interpreter, the job's name, shards, dirs and server URL, and the convergence
stamp's path. extract.yml's inventory check returns it for every host (the rollout table reads it);
the roles, stop.yml and the cache read it through the lookup eagle3.extraction.host_plan, which
runs this same code over the host's variables as the role sees them (a role run on its own gets
the same plan). None derives these facts again.

The parts it composes keep their own modules: server_layout.py (which containers make a server),
server_address.py (where it listens and is called), ml_env.py (the interpreter), extraction_job.py
(the job's dir). What was computed in YAML is computed here: the merged flags, the environment,
the local tensor-parallel size, the leftover patterns, the job's shards and its server URL.

A value the inventory leaves to a fact a role finds later (sglang_server_tp_size from the GPUs
gpu_check counts, sglang_server_interconnect from their topology) is None in the plan the inventory
check makes, and so is what is made of it (the tp-size flag, the local size, the environment).
"""

from __future__ import annotations

import posixpath
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dir_name
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_int, show
from ansible_collections.eagle3.extraction.plugins.plugin_utils import (
    monitoring_plan, online_plan, server_address, server_layout, variables)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.extraction_job import JobDirError, job_dir
from ansible_collections.eagle3.extraction.plugins.plugin_utils.ml_env import venv_python
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_config import ServerConfigError, checked_flags
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

# where extract.yml records each host's last successful run (playbooks/tasks/converged.yml)
STAMP = '/var/lib/eagle3-extraction-converged.json'
# the NCCL values the hand-run setup ran with (8 PCIe GPUs): they fit a PCIe-only topology, not NVLink
NCCL_PCIE = {
    'NCCL_PROTO': 'LL',
    'NCCL_ALGO': 'Ring',
    'NCCL_P2P_LEVEL': 'SYS',
    'NCCL_MAX_NCHANNELS': '16',
    'NCCL_BUFFSIZE': '16777216',
    'NCCL_NTHREADS': '512',
}
# how a host is reached, and ml_env's fact (the interpreter of the venv it made): read by the plan, not role variables
CONNECTION = ('ansible_host', 'ansible_connection')
FACTS = ('ml_env_python_bin',)
# what the plan reads of its host (the records that say plan=True) and of the other hosts (peer=True: their server's
# layout and rank 0's address)
READ = tuple(sorted(variables.PLAN_READ + CONNECTION + FACTS))
PEER_READ = tuple(sorted(variables.PEER_READ + CONNECTION))
# the public variables whose default is the plan's own value (extraction_job's defaults read it through the
# lookup host_plan): the plan computes them when they still hold that default
FROM_PLAN = tuple(name for name, variable in variables.BY_NAME.items()
                  if isinstance(variable.default, str) and "lookup('eagle3.extraction.host_plan')" in variable.default)


class PlanError(ValueError):
    """A value no plan can be made of; the message names the host, the variable and its value."""


class PlanLoop(PlanError):
    """A plan asked for while one of its own variables is read: that value reads the plan."""


class UndeclaredRead(LookupError):
    """The plan's code read a variable its record does not declare for the plan: a bug, named at once (each
    caller passes a host's values its own way, and only the declared ones reach the plan)."""


class _Declared(dict):
    """A host's values as the plan sees them: the declared ones that are set; reading any other is UndeclaredRead."""

    def __init__(self, host, values, declared):
        super().__init__((name, values[name]) for name in declared if name in values)
        self.host = host
        self.declared = frozenset(declared)

    def _check(self, name):
        if name not in self.declared:
            raise UndeclaredRead('the host plan reads %s of %s, which its record (plugins/plugin_utils/role_variables/) '
                                 'does not declare for the plan: plan=True for its own host, peer=True for another\'s'
                                 % (name, self.host))

    def __getitem__(self, name):
        self._check(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self._check(name)
        return super().__contains__(name)

    def get(self, name, default=None):
        self._check(name)
        return super().get(name, default)


def inputs(hosts, host):
    """What the plan of ``host`` is made of, whoever gathered ``hosts`` ({host: {variable: value}}): READ's
    variables of ``host`` and PEER_READ's of every other host, those that are set. The inventory check (every
    variable of every host) and the lookup (this host's as a task sees them) hand the plan the same values."""
    return dict((name, _Declared(name, values, READ if name == host else PEER_READ)) for name, values in hosts.items())


def _given(values, role, name):
    """The host's value, else the role's argument spec default; None for a default that is a template (a
    fact a role finds later decides it) or an unset one."""
    if name in values:
        return values[name]
    default = spec_defaults(role, (name,))[name]
    if isinstance(default, str) and '{{' in default:
        return None
    return default


def _size(value):
    """An inventory integer or None (not decided yet, or not an integer: the rules name that)."""
    return None if value is None else inventory_int(value, 6)


def leftover_patterns(module):
    """What a leftover server looks like in a process table: SGLang's titled children and any launcher."""
    return ['^sglang::',
            r'(^|\s)-m\s+%s(\s|$)' % re.escape(module),
            r'(^|\s)-m\s+sglang\.launch_server(\s|$)']


def environment(dump_dir, interconnect, ifname, extra):
    """The server unit's environment: the capture's dump dir and SGLang's switches, the PCIe NCCL values,
    the socket interface, then sglang_server_env (whose null drops a default). None while the interconnect
    is not known."""
    if interconnect is None:
        return None
    env = {'SGLANG_HS_DUMP_DIR': dump_dir, 'SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN': '1', 'SGL_FORCE_SHUTDOWN': '1'}
    if interconnect == 'pcie':
        env.update(NCCL_PCIE)
    if ifname:
        env.update(NCCL_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname)
    env.update(extra or {})
    return dict((key, value) for key, value in env.items() if value is not None)


def _server(hosts, host, values):
    where = server_layout.layout(hosts, host)
    address = server_address.address(hosts, host)

    def given(name):
        return _given(values, 'sglang_server', name)

    # the flags whose variables' records name them, then sglang_server_flags (which may not set those)
    flags = dict((flag, given(name)) for flag, name in variables.FLAG_VARIABLES.items())
    flags.update(checked_flags(given('sglang_server_flags') or {}, variables.FLAG_VARIABLES))
    # the job's capture check asks for the prompt's hidden states (eagle3_extraction_job/capture_check.py), which
    # SGLang returns only when started with this flag
    if _given(values, 'extraction_job', 'extraction_job_mode') == 'files' and _given(
            values, 'extraction_job', 'extraction_job_capture_check'):
        flags.setdefault('enable-return-hidden-states', True)
    # SGLang serves Prometheus text at /metrics only when started with this flag (the monitoring scrapes it)
    if boolean(given('sglang_server_enable_metrics'), strict=False):
        flags.setdefault('enable-metrics', True)
    if where['nnodes'] > 1:
        flags.update({'nnodes': where['nnodes'], 'node-rank': where['rank'], 'dist-init-addr': where['dist_init_addr']})
    tp_size = _size(flags['tp-size'])
    dump_dir = given('sglang_server_dump_dir')
    return {
        'layout': where,
        'multinode': where['nnodes'] > 1,
        'address': address,
        'url': address['client_url'],
        'flags': flags,
        'tp_size': tp_size,
        # the GPUs this node gives the server: SGLang puts tp-size / nnodes ranks on each node
        'local_tp': tp_size // where['nnodes'] if tp_size is not None else None,
        'environment': environment(dump_dir, given('sglang_server_interconnect'), given('sglang_server_socket_ifname'),
                                   given('sglang_server_env')),
        'unit': given('sglang_server_unit'),
        'dump_dir': dump_dir,
        'leftover_patterns': leftover_patterns(given('sglang_server_module')),
    }


def _job(values, server, watched):
    """The job's shards (default its server's place among the inventory's servers, sorted by name: one
    shard a server, which extract.yml runs on the server's rank 0), its dirs, the server it calls
    (default its own server's client URL) and its metrics dir (default node_exporter's textfile dir while
    monitoring is on: ``watched``, the plan's monitoring section)."""
    def given(name):
        return _given(values, 'extraction_job', name)

    where = server['layout']
    count = _size(given('extraction_job_shard_count')) or len(where['servers'])
    shards = given('extraction_job_shard_indexes') or [where['servers'].index(where['name'])]
    shards = [_size(shard) for shard in shards]
    found = job_dir(values)
    return {
        'name': given('extraction_job_name'),
        'shards': shards,
        'shard_count': count,
        'dir': found,
        # by the shard's index as a string: the plan also travels as a module's JSON result
        'output_dirs': dict((str(shard), posixpath.join(found, shard_dir_name(shard, count))) for shard in shards),
        'server_url': given('extraction_job_server_url') or server['url'],
        'dump_dir': given('extraction_job_dump_dir') or server['dump_dir'],
        'metrics_dir': given('extraction_job_metrics_dir') or (watched['textfile_dir'] if watched else ''),
    }


def plan(hosts, host, online=None):
    """The plan of ``host`` from ``{host: {variable: value}}`` of the extraction servers (READ's variables that are
    set, of the other hosts PEER_READ's; a host ``hosts`` lacks is a one-node server of its own, with a shard of
    its own) and ``online``: ``{group: {host: values}}`` of the online mode's groups (online_plan.GROUPS).

    Returns ``server`` (``layout``, ``multinode``, ``address``, ``url``, ``flags``, ``tp_size``,
    ``local_tp``, ``environment``, ``unit``, ``dump_dir``, ``leftover_patterns``), ``python``, ``job``
    (``name``, ``shards``, ``shard_count``, ``dir``, ``output_dirs``, ``server_url``, ``dump_dir``, ``metrics_dir``),
    ``online``
    (online_plan.section: None outside an online job), ``monitoring`` (monitoring_plan.section: None while it is
    off) and ``stamp``; a host of the online groups alone (a master,
    a trainer) has no ``server`` and ``job`` (None). Raises PlanError naming the host, the variable and its value.
    """
    online = dict((group, inputs(members, host)) for group, members in (online or {}).items())
    own_online = any(host in members for members in online.values())
    hosts = inputs(hosts, host)
    if host not in hosts and own_online:
        values = next(members[host] for members in online.values() if host in members)
        server = job = watched = None
    else:
        values = hosts.get(host, _Declared(host, {}, READ))
        try:
            server = _server(hosts, host, values)
        except (server_address.AddressError, ServerConfigError) as exc:
            raise PlanError('%s: %s' % (host, exc)) from None
        # what Prometheus scrapes of it (None while monitoring is off)
        watched = monitoring_plan.section(host, values, server)
        try:
            job = _job(values, server, watched)
        except JobDirError as exc:
            raise PlanError('%s: %s' % (host, exc)) from None
    python = values.get('ml_env_python_bin') or venv_python(values.get('ml_env_path'))
    try:
        found = online_plan.section(hosts, online, host, server, job)
    except server_address.AddressError as exc:
        raise PlanError('%s: %s' % (host, exc)) from None
    return {'server': server, 'python': python, 'job': job, 'online': found, 'monitoring': watched, 'stamp': STAMP}


# the extraction servers: a multi-node server's other nodes are among them
GROUP = 'extraction_servers'
# the variables being read for a plan in this process, innermost last; and the ones found to read the plan itself
_READING = []
_LOOPS = []


def task_plan(task_vars, template):
    """The plan of a task's host, from what the task sees: its own READ variables through template (the role's
    defaults, role and play variables, facts; less FROM_PLAN's defaults, which read this plan), the other
    extraction servers' PEER_READ as their hostvars hold them. The lookup host_plan and the roles' first check
    make it so. A value of this host that reads the plan itself is refused, naming it (it would ask for its plan
    while the plan is made of it, without end)."""
    if _READING:
        _LOOPS.append(_READING[-1])
        raise PlanLoop('%s reads the host plan while the plan is made of it' % _READING[-1])
    host = task_vars['inventory_hostname']
    groups = task_vars.get('groups', {})
    own = _task_values(host, task_vars, template)
    # a host outside the group (molecule's, a play of its own) is a one-node server of its own
    hosts = _peers(task_vars, GROUP, host) if host in groups.get(GROUP, []) else {}
    if host in groups.get(GROUP, []) or not any(host in groups.get(group, []) for group in online_plan.GROUPS):
        hosts[host] = own
    online = {}
    # the online groups' hosts only where the inventory has an online job (a files-mode run reads no more)
    if any(groups.get(group) for group in online_plan.GROUPS):
        for group in online_plan.GROUPS:
            online[group] = _peers(task_vars, group, host)
            if host in groups.get(group, []):
                online[group][host] = own
    return plan(hosts, host, online)


def _peers(task_vars, group, host):
    """PEER_READ's values of the group's other hosts, as their hostvars hold them."""
    hostvars = task_vars['hostvars']
    found = {}
    for name in task_vars.get('groups', {}).get(group, []):
        if name != host:
            seen = hostvars[name]
            found[name] = dict((key, seen[key]) for key in PEER_READ if key in seen)
    return found


def _task_values(host, task_vars, template):
    plan_defaults = spec_defaults('extraction_job', FROM_PLAN)
    own = {}
    for key in READ:
        if key not in task_vars or (key in plan_defaults and task_vars[key] == plan_defaults[key]):
            continue
        _READING.append(key)
        try:
            own[key] = template(task_vars[key])
        except Exception:
            if key in _LOOPS:
                del _LOOPS[:]
                raise PlanLoop('%s: %s=%s reads the host plan (lookup eagle3.extraction.host_plan), which is made of '
                               'it; give it a value that does not read the plan' % (host, key, show(task_vars[key])))
            raise
        finally:
            _READING.pop()
    return own
