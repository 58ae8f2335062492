# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rollout_converged: whether extract.yml leaves a host's server alone, by the rule (plugin_utils/rollout_hosts.converged)
by which the rollout table reports it unchanged."""

from __future__ import annotations

DOCUMENTATION = r'''
name: rollout_converged
short_description: Whether extract.yml leaves a host's SGLang server alone, every node of it converged
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - True when every node of the host's server (the host alone, or the nodes of its multi-node server) was
    converged at the converged check of this run (C(__extract_converged), M(eagle3.extraction.converged_state))
    and none has a result of this run (C(__extract_result)); a node that runs its roles may restart the server, and
    its peers must be there to start again with it.
  - The same rule by which the filter C(rollout_table) reports the server V(unchanged).
positional: _input, hostvars, host
extends_documentation_fragment:
  - eagle3.extraction.filter_hostvars
  - eagle3.extraction.filter_hostvars.extraction_servers
options:
  host:
    description: The host asked about (C(inventory_hostname)).
    type: str
    required: true
'''

EXAMPLES = r'''
- name: End the play of a converged server's node
  ansible.builtin.meta: end_host
  when: groups['extraction_servers'] | eagle3.extraction.rollout_converged(hostvars, inventory_hostname)
'''

RETURN = r'''
_value:
  description: Whether the server is left alone.
  type: bool
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.rollout_hosts import converged, host_values


def rollout_converged(hosts, hostvars, host):
    """Whether extract.yml leaves ``host``'s server alone (converged()), as the table reports it."""
    try:
        values = host_values(hosts, hostvars)
    except ValueError as exc:
        raise AnsibleFilterError('rollout_converged: %s' % exc) from None
    if host not in values:
        raise AnsibleFilterError('rollout_converged: %s is not one of the extraction servers' % host)
    return converged(values, host)


class FilterModule(object):
    def filters(self):
        return {'rollout_converged': rollout_converged}
