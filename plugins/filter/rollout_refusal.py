# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rollout_refusal: why extract.yml must not bring a host's server up in this run - its inventory check did not
run (--limit without localhost), or its hypervisor did not answer pct list - or '' when nothing stops it."""

from __future__ import annotations

DOCUMENTATION = r'''
name: rollout_refusal
short_description: Why extract.yml must not bring a host's SGLang server up in this run, or an empty string
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - The first of these, as a message for the rollout table; V('') when none holds.
  - The inventory check did not run (O(inventory_checked=false)), because C(--limit) leaves out localhost, where the
    inventory check and the table run. Nothing was changed; the message says how to name localhost and the hypervisor.
  - The hypervisor is not in this run (O(_input) null), did not answer (unreachable), or C(pct list) failed on it
    (M(eagle3.extraction.pct_list)'s result without C(running)). The message names the hypervisor and the cause.
positional: _input
options:
  _input:
    description: The hypervisor's M(eagle3.extraction.pct_list) result, or null when the hypervisor is not in this run.
    type: raw
    required: true
  inventory_checked:
    description: Whether extract.yml's inventory check ran (its result is defined on localhost).
    type: bool
    required: true
  host:
    description: The container (C(inventory_hostname)).
    type: str
    required: true
  node:
    description: Its hypervisor (C(proxmox_container_node)).
    type: str
    required: true
  limit:
    description: The run's C(--limit) (C(ansible_limit)), for the message.
    type: str
    default: ''
'''

EXAMPLES = r'''
- name: Refuse a run without the inventory check, or whose hypervisor did not answer
  vars:
    __refusal: >-
      {{ __extract_node.__extract_pct_list | default(none) | eagle3.extraction.rollout_refusal(
         inventory_checked=hostvars['localhost']['__extract_inventory'] is defined, host=inventory_hostname,
         node=proxmox_container_node, limit=ansible_limit | default('')) }}
  ansible.builtin.assert:
    that: __refusal | length == 0
    fail_msg: "{{ __refusal }}"
'''

RETURN = r'''
_value:
  description: The reason, or V('').
  type: str
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_listing import no_answer


def rollout_refusal(listed, inventory_checked, host, node, limit=''):
    if listed is not None and not isinstance(listed, dict):
        raise AnsibleFilterError('rollout_refusal: the input must be a pct_list result or null, not %r' % (listed,))
    if not inventory_checked:
        return ("extract.yml's inventory check did not run, and nothing was changed: --limit (%s) leaves out "
                "localhost, where the inventory check and the rollout table run. Name localhost and the containers' "
                "hypervisors beside the containers, for example --limit '%s,%s,localhost'."
                % (limit, host, node or '<its hypervisor>'))
    return no_answer(listed, node)


class FilterModule(object):
    def filters(self):
        return {'rollout_refusal': rollout_refusal}
