"""GPU memory queries and GPU-holder detection (plugins/module_utils/gpu_memory.py)
against the real nvidia-smi captures of lab/fixtures/nvidia-smi/ (byte for byte)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.module_utils import gpu_memory, procfs
from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_smi_runner import NvidiaSmi

CAPTURES = REPO / 'lab' / 'fixtures' / 'nvidia-smi'
H200 = CAPTURES / 'h200x2'
PROC_FIXTURES = REPO / 'tests' / 'unit' / 'fixtures' / 'proc'


class Replay(object):
    """A command runner that answers with a captured output and exit code, and records the argv and timeout."""

    def __init__(self, path, rc=0):
        self.out = path.read_text() if path else ''
        self.rc = rc
        self.argv = None
        self.timeout = None

    def __call__(self, argv, timeout):
        self.argv = argv
        self.timeout = timeout
        return self.rc, self.out, ''


def smi(replay, path='nvidia-smi'):
    return NvidiaSmi(path, timeout=7, run=replay)


def test_busy_gpu_memory():
    module = Replay(H200 / 'busy' / 'query-gpu-memory-noheader-nounits.csv')
    gpus = gpu_memory.query_gpu_memory(smi(module, '/usr/bin/nvidia-smi'))
    assert module.timeout == 7
    assert module.argv == ['/usr/bin/nvidia-smi', '--query-gpu=index,memory.used,memory.total',
                           '--format=csv,noheader,nounits']
    assert gpus == [{'index': 0, 'memory_used_mib': 21007, 'memory_total_mib': 143771},
                    {'index': 1, 'memory_used_mib': 21007, 'memory_total_mib': 143771}]
    assert gpu_memory.over_limit(gpus, 0) == gpus
    assert gpu_memory.over_limit(gpus, 21007) == []


def test_idle_compute_apps_is_empty():
    module = Replay(H200 / 'idle' / 'query-compute-apps-noheader-nounits.csv')
    assert gpu_memory.query_compute_apps(smi(module)) == []
    assert module.argv == ['nvidia-smi', '--query-compute-apps=pid,process_name,used_memory,gpu_uuid',
                           '--format=csv,noheader,nounits']


@pytest.mark.parametrize('capture, rc, words', [
    (CAPTURES / 'reported' / 'driver-not-loaded.txt', 9, 'NVIDIA driver not loaded'),
    (CAPTURES / 'reported' / 'driver-library-mismatch.txt', 18, 'version mismatch'),
    (H200 / 'errors' / 'query-gpu-bogus-field.txt', 2, 'does not know a queried field'),
])
def test_failures_carry_the_cause(capture, rc, words):
    with pytest.raises(gpu_memory.GpuQueryError, match=words):
        gpu_memory.query_gpu_memory(smi(Replay(capture, rc)))


def test_unexpected_output_is_an_error():
    with pytest.raises(gpu_memory.GpuQueryError, match='unexpected output'):
        gpu_memory.query_gpu_memory(smi(Replay(H200 / 'idle' / 'topo-m.txt')))


def fd_targets_of_listing(path):
    """Link targets from `ls -l /proc/<pid>/fd` lines."""
    return [line.split(' -> ', 1)[1] for line in path.read_text().splitlines() if ' -> ' in line]


def test_the_captured_cuda_process_holds_gpu_devices():
    targets = fd_targets_of_listing(H200 / 'busy' / 'proc-pid-fd-nvidia.txt')
    assert gpu_memory.holds_gpu_device(targets)


def test_a_listener_does_not_hold_a_gpu():
    pid_dir = next(p for p in (PROC_FIXTURES / 'sandbox').iterdir() if p.name.isdigit())
    assert not gpu_memory.holds_gpu_device(fd_targets_of_listing(pid_dir / 'fd.txt'))
    assert not gpu_memory.holds_gpu_device(['/dev/null', '/tmp/dev/nvidia0', 'socket:[1]'])


def process(cmdline, name):
    return procfs.Process(pid=592, ppid=1, uid=0, state='S', name=name, cmdline=cmdline, nspid=[592],
                          starttime=1, kernel_thread=False)


@pytest.mark.parametrize('process_name, proc, same', [
    ('python3', process(['python3', 'hold.py'], 'python3'), True),            # the capture's holder
    ('/usr/bin/python3', process(['/usr/bin/python3', 'x.py'], 'python3'), True),
    ('sglang::scheduler_TP0', process(['sglang::scheduler_TP0'], 'sglang::schedul'), True),
    ('...rsions/3.11.7/bin/python3.11-with-a-long-name', process(
        ['/root/.pyenv/versions/3.11.7/bin/python3.11-with-a-long-name'], 'python3.11-with'), True),
    # a host PID that happens to be a different program in the container
    ('python3', process(['/usr/sbin/sshd', '-D'], 'sshd'), False),
    ('', process(['python3'], 'python3'), False),
])
def test_nvidia_smi_pid_is_trusted_only_with_the_same_program(process_name, proc, same):
    assert gpu_memory.same_program(process_name, proc) is same
