# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU memory and GPU holders for process_reclaim.

Runs nvidia-smi's CSV queries (parsed by module_utils/nvidia_smi.py, shared
with gpu_facts) and decides which processes hold a GPU.
"""

from __future__ import annotations

import os
import re

from ansible_collections.eagle3.extraction.plugins.module_utils import nvidia_smi

MEMORY_FIELDS = ('index', 'memory.used', 'memory.total')

# what a CUDA process keeps open: /dev/nvidia0.., nvidiactl, nvidia-uvm, nvidia-caps/*
_DEVICE = re.compile(r'^/dev/nvidia')


class GpuQueryError(Exception):
    """nvidia-smi failed or hung (message: the cause and what to do) or printed something unexpected."""


def _query(smi, query, fields, parse):
    try:
        out = smi.query(query, fields)
    except nvidia_smi.NvidiaSmiError as exc:
        raise GpuQueryError(exc.message)
    try:
        return parse(out)
    except ValueError as exc:
        raise GpuQueryError('unexpected output of %s: %s' % (smi.path, exc))


def query_gpu_memory(smi):
    """[{'index', 'memory_used_mib', 'memory_total_mib'}] for every GPU; smi is a nvidia_smi_runner.NvidiaSmi."""
    return _query(smi, 'gpu', MEMORY_FIELDS, lambda out: nvidia_smi.parse_gpus(out, MEMORY_FIELDS))


def query_compute_apps(smi):
    """[{'pid', 'process_name', 'used_memory_mib', 'gpu_uuid'}], one per process and GPU."""
    return _query(smi, 'compute-apps', nvidia_smi.COMPUTE_APP_FIELDS, nvidia_smi.parse_compute_apps)


def over_limit(gpus, limit_mib):
    """GPUs using more than limit_mib (an unknown usage counts as more)."""
    return [g for g in gpus if g['memory_used_mib'] is None or g['memory_used_mib'] > limit_mib]


def holds_gpu_device(fd_targets):
    """Whether any of a process's fd links is an NVIDIA device node."""
    return any(_DEVICE.match(t) for t in fd_targets)


def same_program(process_name, proc):
    """Whether nvidia-smi's process_name describes proc (a procfs.Process).

    NVML knows no PID namespaces: inside a container it may report host PIDs,
    which can collide with unrelated container PIDs. So a PID from nvidia-smi
    is only trusted when the name agrees too. process_name is argv[0] (a path
    or a bare name, cut to its last 33 characters after '...' when long); comm
    is cut to 15 characters.
    """
    if not process_name:
        return False
    base = os.path.basename(process_name)
    argv0 = proc.cmdline[0] if proc.cmdline else ''
    if process_name.startswith('...'):
        return bool(argv0) and argv0.endswith(process_name[3:])
    return process_name == argv0 or base == os.path.basename(argv0) or base[:15] == proc.name
