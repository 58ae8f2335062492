"""gpu_facts' GPUs and processes in the words of gpu_check's messages (filters nvidia_gpus_text,
nvidia_processes_text)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.nvidia_text import (
    FilterModule, nvidia_gpus_text, nvidia_processes_text)

GPUS = [{'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-aaa'}, {'index': 1, 'name': 'NVIDIA H200', 'uuid': 'GPU-bbb'}]
PROCESSES = [{'pid': 592, 'process_name': 'python3', 'used_memory_mib': 20998, 'gpu_uuid': 'GPU-aaa', 'gpu_index': 0},
             {'pid': 611, 'process_name': 'sglang::scheduler', 'used_memory_mib': 512, 'gpu_uuid': 'GPU-bbb',
              'gpu_index': 1}]


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'nvidia_gpus_text', 'nvidia_processes_text'}


def test_the_gpus():
    assert nvidia_gpus_text(GPUS) == 'GPU 0 NVIDIA H200 GPU-aaa, GPU 1 NVIDIA H200 GPU-bbb'
    assert nvidia_gpus_text([]) == ''


def test_the_holders_of_one_gpu():
    assert nvidia_processes_text(PROCESSES) == 'PID 592 (python3, 20998 MiB), PID 611 (sglang::scheduler, 512 MiB)'


def test_the_holders_of_every_gpu():
    assert nvidia_processes_text(PROCESSES, True) == (
        'PID 592 (python3) holds 20998 MiB on GPU 0 (GPU-aaa); PID 611 (sglang::scheduler) holds 512 MiB on GPU 1 '
        '(GPU-bbb)')


def test_a_memory_not_reported_is_none():
    assert nvidia_processes_text([dict(PROCESSES[0], used_memory_mib=None)]) == 'PID 592 (python3, None MiB)'


def test_something_else_is_refused():
    with pytest.raises(AnsibleFilterError, match='gpu_facts'):
        nvidia_gpus_text({'gpus': GPUS})
