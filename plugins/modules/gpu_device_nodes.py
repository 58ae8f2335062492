#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_device_nodes
short_description: The NVIDIA device nodes of a Proxmox VE node that a container gets, and what is wrong with them
version_added: 0.1.0
description:
  - Runs on the node (the hypervisor). Finds the NVIDIA device nodes under C(/dev) and C(/dev/nvidia-caps)
    (C(nvidia<N>), C(nvidiactl), C(nvidia-uvm), C(nvidia-uvm-tools), C(nvidia-cap<N>); C(nvidia-modeset) is for
    displays and is left out), reads C(/proc/devices) (a driver's character major is there exactly when the driver
    is loaded, and the C(nvidia-uvm) major is dynamic) and chooses the nodes to pass through - the GPUs asked for,
    then the shared nodes - followed by O(extra_devices).
  - RV(problems) says what is wrong - the nvidia kernel module not loaded, a GPU asked for that has no node, no
    C(nvidiactl), the nvidia-uvm driver loaded without its nodes. With O(require=true) the task fails naming them
    and what was found; with O(require=false) (a container without GPUs) it returns them.
  - Reads only. One call does what a find, a read of C(/proc/devices) and a choice would do in three tasks.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  gpus:
    description:
      - V(all), or the indexes of the GPUs asked for (C(/dev/nvidia<index>)).
    type: raw
    default: all
  require:
    description:
      - Fail when RV(problems) is not empty or no GPU node was found.
    type: bool
    default: true
  extra_devices:
    description:
      - Device paths passed through after the NVIDIA nodes, as given.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.pct_container
    description: Gives the container the device nodes (its O(eagle3.extraction.pct_container#module:devices)).
  - plugin: eagle3.extraction.nvidia_device_nodes
    plugin_type: filter
    description: The same choice from nodes and a C(/proc/devices) read elsewhere.
"""

EXAMPLES = r"""
- name: Find the NVIDIA device nodes of the hypervisor and choose those CT 101 gets
  eagle3.extraction.gpu_device_nodes:
    gpus: [0, 1]
    extra_devices: [/dev/fuse]
  delegate_to: pve1
  register: nodes

- name: Pass them through
  eagle3.extraction.pct_container:
    vmid: 101
    devices: "{{ nodes.devices }}"
  delegate_to: pve1
"""

RETURN = r"""
devices:
  description: The nodes to pass through, the GPUs asked for then the shared nodes, then O(extra_devices); no NVIDIA
    node when no GPU node was found.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidia0, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidiactl, /dev/nvidia-caps/nvidia-cap1]
gpus:
  description: The GPU nodes asked for that exist.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidia0]
gpus_missing:
  description: The GPU nodes asked for that do not exist.
  returned: always
  type: list
  elements: str
  sample: []
found:
  description: Every NVIDIA node found, sorted.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidia0, /dev/nvidiactl]
problems:
  description: What is wrong, a sentence each.
  returned: always
  type: list
  elements: str
  sample: ["GPU device nodes missing: /dev/nvidia3."]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_devices import choose, find_nodes

# where the node's device nodes and driver majors are (other paths only in tests)
DEV = '/dev'
PROC_DEVICES = '/proc/devices'


def gpus_value(value):
    """'all', or the GPU indexes as ints; None when it is neither."""
    if value == 'all':
        return value
    if isinstance(value, (list, tuple)):
        try:
            return [int(index) for index in value]
        except (TypeError, ValueError):
            return None
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type='raw', default='all'),
            require=dict(type='bool', default=True),
            extra_devices=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    gpus = gpus_value(params['gpus'])
    if gpus is None:
        module.fail_json(msg="gpus must be 'all' or a list of GPU indexes, not %r" % (params['gpus'],))
    try:
        with open(PROC_DEVICES) as handle:
            proc_devices = handle.read()
    except OSError as exc:
        module.fail_json(msg='cannot read %s: %s' % (PROC_DEVICES, exc))
    nodes = choose(find_nodes(DEV), gpus, proc_devices)
    nodes['devices'] = nodes['devices'] + params['extra_devices']
    if params['require'] and (nodes['problems'] or not nodes['gpus']):
        module.fail_json(
            msg='%s Found: %s. For a container without GPUs, set require to false (the role proxmox_container: '
            'proxmox_container_require_gpus).'
            % (' '.join(nodes['problems']) or 'no GPU device node found.', ', '.join(nodes['found'])
               or 'no NVIDIA device nodes'), **nodes)
    module.exit_json(changed=False, **nodes)


if __name__ == '__main__':
    main()
