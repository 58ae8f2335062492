# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""container_running: whether a container is running by its hypervisor's pct list, the rule by which
converged_state's action compares a container (plugin_utils/converged_inputs.listed), for a play that must not
contact a container that is not running."""

from __future__ import annotations

DOCUMENTATION = r'''
name: container_running
short_description: Whether a container is running by its hypervisor's answer to pct list
version_added: 0.1.0
author: eagle3.extraction maintainers (@eagle3)
description:
  - True when the hypervisor answered C(pct list) (M(eagle3.extraction.pct_list)'s result has C(running)) and lists
    the container as running. False when the container is stopped or not there, or the hypervisor is not in this
    run (O(_input) null), was unreachable, or C(pct list) failed on it.
  - The same rule by which M(eagle3.extraction.converged_state) compares a container (its option C(listing)). A play
    that only reads a container (extract.yml's dataset play) contacts it only when this is true, so that a stopped
    container costs no connection attempt and no unreachable host in the output.
positional: _input, vmid
options:
  _input:
    description: The hypervisor's M(eagle3.extraction.pct_list) result, or null when the hypervisor is not in this run.
    type: raw
    required: true
  vmid:
    description: The container's ID on its hypervisor (C(proxmox_container_vmid)), a positive integer.
    type: int
    required: true
'''

EXAMPLES = r'''
- name: Read the dataset the job was started with, on a running container alone
  ansible.builtin.include_role:
    name: eagle3.extraction.extraction_job
    tasks_from: dataset
  when: >-
    hostvars[proxmox_container_node].__extract_pct_list | default(none)
    | eagle3.extraction.container_running(proxmox_container_vmid)
'''

RETURN = r'''
_value:
  description: Whether the container runs, by its hypervisor's answer.
  type: bool
'''

from ansible.errors import AnsibleFilterError
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_vmid
from ansible_collections.eagle3.extraction.plugins.plugin_utils.converged_inputs import listed


def container_running(listing, vmid):
    number = inventory_vmid(vmid)
    if number is None or number < 1:
        raise AnsibleFilterError('container_running: vmid must be a positive integer, not %r' % (vmid,))
    why, _state = listed(listing, number)
    return why is None


class FilterModule(object):
    def filters(self):
        return {'container_running': container_running}
