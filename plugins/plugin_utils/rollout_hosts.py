# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What extract.yml's end reads of each extraction server, and the one rule by which a server is left alone
(converged): the filters rollout_table and rollout_converged read both."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import PEER_READ
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_layout import layout

# what each host's play left (playbooks: the host play's last task)
RESULT = '__extract_result'
# the converged check's result (converged_state, playbooks/tasks/converged.yml)
CONVERGED = '__extract_converged'
# each host's layout as the plan reads it, its container, its results
READ = PEER_READ + ('proxmox_container_vmid', RESULT, CONVERGED)


def host_values(hosts, hostvars):
    """{host: READ's variables that are set} of ``hosts`` (the extraction servers' names), in their order;
    ValueError when hosts is not a list of names."""
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(host, str) for host in hosts):
        raise ValueError('the input must be the list of extraction servers')
    values = {}
    for host in hosts:
        found = hostvars[host]
        values[host] = dict((key, found[key]) for key in READ if key in found)
    return values


def converged(hosts, name):
    """Whether the server of ``name`` is left alone: every node of it converged at the start of the run
    (a node that runs its roles may restart the server, and its peers must be there to start again
    with it) and none has a result of this run (an applied node's record also says converged)."""
    nodes = layout(hosts, name)['nodes']
    return all((hosts[node].get(CONVERGED) or {}).get('converged') is True and RESULT not in hosts[node]
               for node in nodes)
