#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the action plugin role_input_check (plugins/action/role_input_check.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: role_input_check
short_description: Check one role's variables as this host sees them, before the role changes anything
version_added: 0.1.0
author:
  - eagle3.extraction maintainers (@eagle3)
description:
  - Runs on the controller alone (an action plugin), so it contacts no host.
  - Reads every variable of O(role)'s argument spec as this host sees it (the role's defaults included) and
    checks it with Ansible's argument spec validator (types, choices) and against what that format cannot say
    (ranges, whole-value patterns, paths that are not system directories, no control character in any string;
    each variable's record in C(plugin_utils/role_variables/<role>.py)), the rules between its variables
    (C(CROSS_RULES), such as a low watermark at most the high one, a shard index below the count) and the
    variables it needs set
    (C(REQUIRED)), the same rules M(eagle3.extraction.inventory_check) applies to a whole inventory.
  - Each role's preflight runs it as its first task.
  - Fails once, listing every bad value with its variable (an API key is never shown). A value that refers to
    a fact not set yet is skipped and listed in RV(unresolved).
options:
  role:
    description: The role whose variables are checked.
    type: str
    required: true
    choices: [proxmox_container, gpu_check, ml_env, sglang_patch, sglang_server, extraction_job]
extends_documentation_fragment:
  - eagle3.extraction.controller_check
"""

EXAMPLES = r"""
- name: Check the role's variables (ranges, formats, no control characters)
  eagle3.extraction.role_input_check:
    role: sglang_server
"""

RETURN = r"""
errors:
  description: Every bad value, each naming its variable.
  returned: failed
  type: list
  elements: str
unresolved:
  description: The variables whose value refers to a fact not set yet.
  returned: always
  type: list
  elements: str
through_pct:
  description:
    - Whether the host is reached through its hypervisor (C(ansible_connection=community.proxmox.proxmox_pct_remote)),
      so that its C(ansible_host) is the node's address.
    - For O(role=proxmox_container), which also checks that such a host's C(proxmox_vmid) and C(ansible_host) are its
      container's id and its node's address.
  returned: when O(role=proxmox_container)
  type: bool
"""
