# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter nvidia_device_nodes: which of a hypervisor's NVIDIA device nodes a container gets, and what is
wrong with them, from the nodes found under /dev and /proc/devices (the module gpu_device_nodes does the same
on the node itself)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_devices import choose
from ansible_collections.eagle3.extraction.plugins.plugin_utils.printed_text import printed_text


def nvidia_device_nodes(found, gpus, proc_devices_text):
    """found: the paths of the nodes found under /dev; gpus: 'all' or GPU indexes
    (proxmox_container_gpus); proc_devices_text: /proc/devices (module_utils/nvidia_devices.py's choose)."""
    if not isinstance(found, (list, tuple)) or not all(isinstance(path, str) for path in found):
        raise AnsibleFilterError('nvidia_device_nodes: the input must be the list of device node paths found')
    if gpus != 'all' and (isinstance(gpus, (str, bytes)) or not isinstance(gpus, (list, tuple))):
        raise AnsibleFilterError("nvidia_device_nodes: gpus must be 'all' or a list of GPU indexes, not %r" % (gpus,))
    try:
        text = printed_text(proc_devices_text, 'nvidia_device_nodes')
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return choose(found, gpus, text)


class FilterModule(object):
    def filters(self):
        return {'nvidia_device_nodes': nvidia_device_nodes}
