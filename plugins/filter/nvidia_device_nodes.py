# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter nvidia_device_nodes: which of a hypervisor's NVIDIA device nodes a container gets, and what is
wrong with them, from the nodes found under /dev and /proc/devices (proxmox_container's preflight)."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.command_output import proc_devices

GPU_NODE = re.compile(r'/dev/nvidia[0-9]+\Z')
SHARED_NODES = ('/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools')
CAPS_DIR = '/dev/nvidia-caps/'


def nvidia_device_nodes(found, gpus, proc_devices_text):
    """found: the paths of the nodes found under /dev; gpus: 'all' or GPU indexes
    (proxmox_container_gpus); proc_devices_text: /proc/devices."""
    if not isinstance(found, (list, tuple)) or not all(isinstance(path, str) for path in found):
        raise AnsibleFilterError('nvidia_device_nodes: the input must be the list of device node paths found')
    if gpus != 'all' and (isinstance(gpus, (str, bytes)) or not isinstance(gpus, (list, tuple))):
        raise AnsibleFilterError("nvidia_device_nodes: gpus must be 'all' or a list of GPU indexes, not %r" % (gpus,))
    paths = list(found)
    majors = proc_devices(proc_devices_text)['character']
    if gpus == 'all':
        wanted = sorted(path for path in paths if GPU_NODE.match(path))
    else:
        wanted = ['/dev/nvidia%s' % index for index in gpus]
    present = [path for path in wanted if path in paths]
    missing = [path for path in wanted if path not in paths]
    shared = sorted(path for path in paths if path in SHARED_NODES) + sorted(
        path for path in paths if path.startswith(CAPS_DIR))
    problems = []
    if 'nvidia' not in majors:
        problems.append("the nvidia kernel module is not loaded (no 'nvidia' in /proc/devices).")
    if missing:
        problems.append('GPU device nodes missing: %s.' % ', '.join(missing))
    if '/dev/nvidiactl' not in paths:
        problems.append('/dev/nvidiactl is missing.')
    if 'nvidia-uvm' in majors and '/dev/nvidia-uvm' not in paths:
        problems.append("the nvidia-uvm driver is loaded (major %d) but /dev/nvidia-uvm does not exist: run "
                        "'nvidia-modprobe -u -c=0' on the node to create them." % majors['nvidia-uvm'])
    return {
        'devices': (present + shared) if present else [],
        'gpus': present,
        'gpus_missing': missing,
        'found': sorted(paths),
        'problems': problems,
    }


class FilterModule(object):
    def filters(self):
        return {'nvidia_device_nodes': nvidia_device_nodes}
