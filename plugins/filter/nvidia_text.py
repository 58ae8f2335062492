# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that write gpu_facts' GPUs and compute processes as the words of gpu_check's messages, so that no
task loops over them in Jinja.

- nvidia_gpus_text: ``GPU 0 NVIDIA H200 GPU-c78b..., GPU 1 ...``
- nvidia_processes_text: ``PID 592 (python3, 20998 MiB), PID ...`` (the holders of one GPU), or with
  ``gpus=true`` ``PID 592 (python3) holds 20998 MiB on GPU 0 (GPU-c78b...); ...`` (the holders of every GPU).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.plugin_utils.gpu_text import gpus_text, processes_text


def _items(value, name, what):
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, dict) for item in value):
        raise AnsibleFilterError('%s: the input must be the list of %s that gpu_facts returns' % (name, what))
    return value


def nvidia_gpus_text(gpus):
    """``GPU <index> <name> <uuid>`` of each GPU, joined with ``, ``."""
    return gpus_text(_items(gpus, 'nvidia_gpus_text', 'GPUs'))


def nvidia_processes_text(processes, gpus=False):
    """Each compute process in a few words: ``PID <pid> (<name>, <MiB> MiB)`` joined with ``, ``; with
    ``gpus``, ``PID <pid> (<name>) holds <MiB> MiB on GPU <index> (<uuid>)`` joined with ``; ``."""
    return processes_text(_items(processes, 'nvidia_processes_text', 'compute processes'), gpus)


class FilterModule(object):
    def filters(self):
        return {'nvidia_gpus_text': nvidia_gpus_text, 'nvidia_processes_text': nvidia_processes_text}
