# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a hypervisor's NVIDIA device nodes a container gets, and what is wrong with them, from the nodes
under /dev and /proc/devices: the module gpu_device_nodes (proxmox_container's preflight) and the filters
nvidia_device_nodes and proc_devices."""

from __future__ import annotations

import fnmatch
import os
import re

GPU_NODE = re.compile(r'/dev/nvidia[0-9]+\Z')
SHARED_NODES = ('/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools')
CAPS_DIR = '/dev/nvidia-caps/'
# the names a CUDA container needs, under /dev and /dev/nvidia-caps (nvidia-modeset is for displays)
PATTERNS = ('nvidia[0-9]*', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-cap[0-9]*')


def parse_proc_devices(text):
    """``/proc/devices`` as ``{'character': {name: major}, 'block': {name: major}}``; a name listed twice
    keeps its first major. Lines that are not ``<major> <name>`` are skipped."""
    found = {'character': {}, 'block': {}}
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == 'Character devices:':
            section = 'character'
        elif stripped == 'Block devices:':
            section = 'block'
        elif section:
            words = stripped.split()
            if len(words) == 2 and words[0].isdigit():
                found[section].setdefault(words[1], int(words[0]))
    return found


def find_nodes(dev='/dev'):
    """The paths under ``dev`` and its subdirectories (one level down) whose names match PATTERNS, any file type,
    reported as under /dev (``dev`` is another directory only in tests)."""
    found = []
    for root, dirs, files in os.walk(dev):
        if root != dev:
            dirs[:] = []
        for name in sorted(dirs + files):
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in PATTERNS):
                found.append('/dev/' + os.path.relpath(os.path.join(root, name), dev))
    return sorted(found)


def choose(found, gpus, proc_devices_text):
    """found: the paths of the nodes found under /dev; gpus: 'all' or GPU indexes (proxmox_container_gpus);
    proc_devices_text: /proc/devices. The nodes to pass (GPUs asked for, then the shared ones), and what is wrong."""
    paths = list(found)
    majors = parse_proc_devices(proc_devices_text)['character']
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
