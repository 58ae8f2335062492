# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_server_restart: whether a multi-node server restarts, all its nodes together, and which of its
nodes did not reach the start (roles/sglang_server/tasks/restart_server.yml)."""

from __future__ import annotations

DOCUMENTATION = r'''
name: sglang_server_restart
short_description: Whether a multi-node SGLang server restarts together, and which nodes did not reach the start
version_added: 0.2.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - Reads, for each node of a server, what sglang_server's restart step noted on it - C(__sglang_server_at_start)
    (it reached the start) and C(__sglang_server_node_must_restart) (its unit or config changed, its unit is not
    active, or rank 0 does not answer 200).
  - C(missing) lists the nodes that did not reach the start (a node that failed earlier never does), in the order
    given; C(restart) is true when one node that did must restart, and then every node restarts together (a node
    never restarts alone, its peers would wait in NCCL for a rank that is gone).
positional: _input, hostvars
extends_documentation_fragment: eagle3.extraction.filter_hostvars
options:
  _input:
    description: The server's nodes in rank order (the host's plan's C(server.layout.nodes)).
    type: list
    elements: str
    required: true
'''

EXAMPLES = r'''
- name: Check that every node of the server is still in the run
  ansible.builtin.assert:
    that: (__sglang_server_layout.nodes | eagle3.extraction.sglang_server_restart(hostvars)).missing | length == 0
'''

RETURN = r'''
_value:
  description: C(missing), the nodes that did not reach the start; C(restart), whether the server restarts.
  type: dict
'''

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

AT_START = '__sglang_server_at_start'
MUST_RESTART = '__sglang_server_node_must_restart'


def sglang_server_restart(nodes, hostvars):
    if not isinstance(nodes, (list, tuple)) or not nodes or not all(isinstance(node, str) for node in nodes):
        raise AnsibleFilterError("sglang_server_restart: the input must be the server's nodes, a non-empty list")
    noted = dict((node, hostvars[node]) for node in nodes)
    missing = [node for node in nodes if AT_START not in noted[node]]
    restart = any(boolean(noted[node].get(MUST_RESTART, False), strict=False) for node in nodes if node not in missing)
    return {'missing': missing, 'restart': restart}


class FilterModule(object):
    def filters(self):
        return {'sglang_server_restart': sglang_server_restart}
