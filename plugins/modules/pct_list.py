#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pct_list
short_description: The LXC containers of a Proxmox VE node and their status, from pct list
version_added: 0.1.0
description:
  - Runs C(pct list) on the Proxmox VE node and returns each container's status, lock and name, and the IDs
    of those that run, so that no task parses pct's output.
  - Returns too, for each container, the fingerprint of its configuration file C(<conf_dir>/<vmid>.conf) in
    RV(config_states), the value M(eagle3.extraction.converged_state) returns with
    O(eagle3.extraction.converged_state#module:mode=digest) for that one file, so that the converged check of
    C(extract.yml) compares a container's configuration with the one recorded without another call to the node.
  - An action plugin. The node runs one shell command (C(pct list), then C(sha256sum) of the configuration files)
    and no Python; its output is read on the controller. C(extract.yml) lists every hypervisor's containers on
    every run, and a module there cost more than pct itself.
  - Reads only.
  - A C(pct) that fails or hangs fails the task with pct's exit code and error output (RV(rc), RV(stderr)).
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  pct_path:
    description:
      - Path of the C(pct) program on the node, absolute.
    type: str
    default: /usr/sbin/pct
  command_timeout:
    description:
      - Seconds C(pct list) may take (1 to 86400); then it gets TERM, and KILL 5 seconds later.
    type: int
    default: 120
  conf_dir:
    description:
      - Where the node keeps its containers' configuration files (C(<vmid>.conf)), absolute.
    type: str
    default: /etc/pve/lxc
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - eagle3.extraction.attributes.action
attributes:
  check_mode:
    support: full
    details: Reads only, so check mode runs it unchanged.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - A Proxmox VE node (C(pct)), with a POSIX shell and GNU coreutils (C(timeout), C(sha256sum)), as Proxmox VE has.
notes:
  - V(changed) is always V(false).
seealso:
  - module: eagle3.extraction.pct_container
    description: Create, configure, start and stop one container.
"""

EXAMPLES = r"""
- name: List the containers of each hypervisor
  eagle3.extraction.pct_list:
  register: pct_list

- name: Say whether CT 101 runs
  ansible.builtin.debug:
    msg: "{{ 101 in pct_list.running }}"
"""

RETURN = r"""
containers:
  description: Every container of the node, by ID (a string, as JSON has it), with its status, lock and name.
  returned: success
  type: dict
  sample: {'101': {status: running, lock: '', name: ct1}, '102': {status: stopped, lock: backup, name: ct2}}
running:
  description: The IDs of the containers that run.
  returned: success
  type: list
  elements: int
  sample: [101]
config_states:
  description:
    - Each container's configuration fingerprint, by ID (a string), as
      M(eagle3.extraction.converged_state) O(eagle3.extraction.converged_state#module:mode=digest) gives it for that one
      file (a file that cannot be read counts as absent).
  returned: success
  type: dict
  sample: {'101': 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
rc:
  description: pct's exit code; null when it timed out or could not be run.
  returned: always
  type: int
  sample: 0
stderr:
  description: What pct (or the node's shell, or C(timeout)) printed on its error output.
  returned: always
  type: str
  sample: ''
"""
