#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the action plugin gpu_requirements (plugins/action/gpu_requirements.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_requirements
short_description: Check the GPUs gpu_facts read against gpu_check's requirements
version_added: 0.1.0
author:
  - eagle3.extraction maintainers (@eagle3)
description:
  - Runs on the controller alone (an action plugin), so it contacts no host; the role C(gpu_check) runs it after
    M(eagle3.extraction.gpu_facts) (and the reclaim, when there was one).
  - Checks, in this order, that nvidia-smi lists a GPU, the driver's pin O(driver_version), its minimum
    O(driver_version_min), that it is the hypervisor's kernel module (O(hypervisor)), the GPU count O(gpu_count),
    each GPU's model O(gpu_model) and persistence mode, and with O(require_idle) each GPU's memory in use (at most
    O(memory_used_max_mib)) and that no compute process runs.
  - Fails once, with every requirement not met (each message names the host, the GPU, the figure found and the
    variable that sets the limit). Otherwise returns what the role publishes with M(ansible.builtin.set_fact),
    RV(gpu_check_interconnect), RV(gpu_check_gpus) and RV(gpu_check_summary).
options:
  nvidia:
    description: What M(eagle3.extraction.gpu_facts) read on the host (its C(ansible_facts.nvidia)).
    type: dict
    required: true
  driver_version:
    description: The driver version the GPUs must run; empty checks none.
    type: str
    default: ''
  driver_version_min:
    description: The lowest driver version allowed; empty checks none.
    type: str
    default: ''
  gpu_count:
    description: The number of GPUs the host must have; V(0) checks none.
    type: int
    default: 0
  gpu_model:
    description: The model every GPU must be (nvidia-smi's name); empty checks none.
    type: str
    default: ''
  persistence_mode:
    description: Whether every GPU must have persistence mode enabled.
    type: bool
    default: true
  memory_used_max_mib:
    description: With O(require_idle), the most MiB in use allowed on each GPU.
    type: int
    default: 0
  require_idle:
    description:
      - Whether each GPU must be at most O(memory_used_max_mib) in use and no compute process may run.
      - Left out after a reclaim in check mode (O(reclaimed) would have killed, killed nothing).
    type: bool
    default: true
  reclaim:
    description: Whether the role reclaimed the GPUs first (C(gpu_check_reclaim)); only the messages' advice reads it.
    type: bool
    default: false
  reclaimed:
    description: The result of M(eagle3.extraction.process_reclaim), when the role reclaimed.
    type: dict
    default: {}
  hypervisor:
    description: The hypervisor whose kernel module the driver must be; empty checks none.
    type: str
    default: ''
  hypervisor_result:
    description: The result of M(eagle3.extraction.gpu_facts) on O(hypervisor) (its C(kernel_module), or its C(msg)).
    type: dict
    default: {}
extends_documentation_fragment:
  - eagle3.extraction.controller_check
"""

EXAMPLES = r"""
- name: Read the GPUs
  eagle3.extraction.gpu_facts:

- name: Check them
  eagle3.extraction.gpu_requirements:
    nvidia: "{{ ansible_facts['nvidia'] }}"
    driver_version_min: "580"
    gpu_count: 8
    gpu_model: NVIDIA H200
  register: gpus

- name: Publish the interconnect
  ansible.builtin.set_fact:
    gpu_interconnect: "{{ gpus.gpu_check_interconnect }}"
"""

RETURN = r"""
problems:
  description: Every requirement not met, one message each; empty when the GPUs meet them all.
  returned: always
  type: list
  elements: str
gpu_check_interconnect:
  description: C(nvlink) or C(pcie) (gpu_facts' C(interconnect)), when every requirement is met.
  returned: success
  type: str
gpu_check_gpus:
  description: The GPUs (gpu_facts' C(gpus)), when every requirement is met.
  returned: success
  type: list
  elements: dict
gpu_check_summary:
  description: The GPUs in a few words, C(2 x NVIDIA H200) (gpu_facts' C(summary)), when every requirement is met.
  returned: success
  type: str
"""
