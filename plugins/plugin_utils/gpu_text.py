# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_facts' GPUs and compute processes as the words of gpu_check's messages: the filters nvidia_gpus_text
and nvidia_processes_text (which check their input first) and gpu_requirements' messages write them alike."""

from __future__ import annotations


def gpus_text(gpus):
    """``GPU <index> <name> <uuid>`` of each GPU (gpu_facts' dicts), joined with ``, ``."""
    return ', '.join('GPU %s %s %s' % (gpu.get('index'), gpu.get('name'), gpu.get('uuid')) for gpu in gpus)


def processes_text(processes, gpus=False):
    """Each compute process (gpu_facts' dicts) in a few words: ``PID <pid> (<name>, <MiB> MiB)`` joined with
    ``, ``; with ``gpus``, ``PID <pid> (<name>) holds <MiB> MiB on GPU <index> (<uuid>)`` joined with ``; ``."""
    if gpus:
        return '; '.join('PID %s (%s) holds %s MiB on GPU %s (%s)' % (
            p.get('pid'), p.get('process_name'), p.get('used_memory_mib'), p.get('gpu_index'), p.get('gpu_uuid'))
            for p in processes)
    return ', '.join('PID %s (%s, %s MiB)' % (p.get('pid'), p.get('process_name'), p.get('used_memory_mib'))
                     for p in processes)
