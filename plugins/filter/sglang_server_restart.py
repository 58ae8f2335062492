# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of a multi-node server's restart step (roles/sglang_server/tasks/restart_server.yml), so that
no task decides a restart in Jinja; each is documented in its own .yml beside this file.

- sglang_server_node_must_restart: whether one node must restart (its config or unit file changed, its
  unit is not active, or rank 0 does not answer 200), the rule's one owner.
- sglang_server_restart: which nodes did not reach the start, and whether the server restarts, all its
  nodes together (one node that must restarts them all).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

# what each node notes at the restart step
AT_START = '__sglang_server_at_start'
MUST_RESTART = '__sglang_server_node_must_restart'
# what a node registered before it (configure.yml, run.yml)
CONFIG_WRITTEN = '__sglang_server_config_written'
UNIT_WRITTEN = '__sglang_server_unit_written'
BEFORE = '__sglang_server_before'


def http_status(value):
    """The status as ``default(0, true) | int`` reads it: none, empty or not a number is 0."""
    if not value:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def written(noted, name):
    """Whether the write registered as ``name`` changed its file; one that did not run (its tag left
    out) changed nothing."""
    return bool((noted.get(name) or {}).get('changed', False))


def sglang_server_node_must_restart(noted, rank):
    """Whether the node whose variables are ``noted`` must restart: its config or unit file changed, its
    unit was not active before the start, or (rank 0) its /health did not answer 200 before it."""
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise AnsibleFilterError("sglang_server_node_must_restart: the rank must be the node's rank, an int "
                                 "0 or more (got %r)" % (rank,))
    before = noted.get(BEFORE) if hasattr(noted, 'get') else None
    if not hasattr(before, 'get'):
        raise AnsibleFilterError("sglang_server_node_must_restart: the input must be the node's hostvars, with "
                                 "%s (server_health's result before the start)" % BEFORE)
    return (written(noted, CONFIG_WRITTEN) or written(noted, UNIT_WRITTEN)
            or before.get('active_state') != 'active'
            or (rank == 0 and http_status(before.get('http')) != 200))


def sglang_server_restart(nodes, hostvars):
    if not isinstance(nodes, (list, tuple)) or not nodes or not all(isinstance(node, str) for node in nodes):
        raise AnsibleFilterError("sglang_server_restart: the input must be the server's nodes, a non-empty list")
    noted = dict((node, hostvars[node]) for node in nodes)
    missing = [node for node in nodes if AT_START not in noted[node]]
    restart = any(boolean(noted[node].get(MUST_RESTART, False), strict=False) for node in nodes if node not in missing)
    return {'missing': missing, 'restart': restart}


class FilterModule(object):
    def filters(self):
        return {'sglang_server_restart': sglang_server_restart,
                'sglang_server_node_must_restart': sglang_server_node_must_restart}
