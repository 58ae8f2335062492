"""gpu_device_nodes in-process against a /dev and a /proc/devices made in a temporary directory (the role runs it
on real device nodes in tests/unit/test_proxmox_container_gpus.py)."""

from __future__ import annotations

import pytest

from ansible_collections.eagle3.extraction.plugins.module_utils.nvidia_devices import find_nodes
from ansible_collections.eagle3.extraction.plugins.modules import gpu_device_nodes

LOADED = 'Character devices:\n195 nvidia\n195 nvidiactl\n238 nvidia-uvm\n241 nvidia-caps\n\nBlock devices:\n  8 sd\n'
NOT_LOADED = 'Character devices:\n  1 mem\n\nBlock devices:\n  8 sd\n'
H200 = ['nvidia0', 'nvidia1', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset',
        'nvidia-caps/nvidia-cap1', 'nvidia-caps/nvidia-cap2', 'null']


@pytest.fixture
def node(tmp_path, monkeypatch):
    """node(names, proc_devices): a /dev holding ``names`` (plain files stand for the nodes) and /proc/devices."""
    def make(names, proc_devices):
        dev = tmp_path / 'dev'
        for name in names:
            (dev / name).parent.mkdir(parents=True, exist_ok=True)
            (dev / name).write_text('')
        dev.mkdir(exist_ok=True)
        (tmp_path / 'devices').write_text(proc_devices)
        monkeypatch.setattr(gpu_device_nodes, 'DEV', str(dev))
        monkeypatch.setattr(gpu_device_nodes, 'PROC_DEVICES', str(tmp_path / 'devices'))
    return make


def test_it_finds_the_nvidia_nodes_one_level_down_and_leaves_modeset_out(tmp_path):
    for name in H200 + ['nvidia-caps/deeper/nvidia-cap9']:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text('')
    assert find_nodes(str(tmp_path)) == ['/dev/nvidia-caps/nvidia-cap1', '/dev/nvidia-caps/nvidia-cap2',
                                         '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidia0',
                                         '/dev/nvidia1', '/dev/nvidiactl']


def test_all_gpus_then_the_shared_nodes_then_the_extra_devices(node, run_module):
    node(H200, LOADED)
    result = run_module(gpu_device_nodes, {'extra_devices': ['/dev/fuse']})
    assert not result.get('failed'), result
    assert result['changed'] is False and result['problems'] == []
    assert result['devices'] == ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools',
                                 '/dev/nvidiactl', '/dev/nvidia-caps/nvidia-cap1', '/dev/nvidia-caps/nvidia-cap2',
                                 '/dev/fuse']


def test_the_gpus_asked_for_in_check_mode(node, run_module):
    node(H200, LOADED)
    result = run_module(gpu_device_nodes, {'gpus': ['1'], '_ansible_check_mode': True})
    assert result['gpus'] == ['/dev/nvidia1'] and '/dev/nvidia0' not in result['devices']


def test_a_missing_gpu_fails_naming_it_and_what_was_found(node, run_module):
    node(H200, LOADED)
    result = run_module(gpu_device_nodes, {'gpus': [0, 3]})
    assert result['failed'] and 'GPU device nodes missing: /dev/nvidia3.' in result['msg']
    assert '/dev/nvidia0' in result['msg'] and 'proxmox_container_require_gpus' in result['msg']
    assert result['gpus_missing'] == ['/dev/nvidia3']


def test_no_driver_fails_when_required_and_passes_the_extras_alone_when_not(node, run_module):
    node([], NOT_LOADED)
    result = run_module(gpu_device_nodes, {})
    assert result['failed'] and 'the nvidia kernel module is not loaded' in result['msg']
    assert 'no NVIDIA device nodes' in result['msg']
    result = run_module(gpu_device_nodes, {'require': False, 'extra_devices': ['/dev/full']})
    assert not result.get('failed') and result['devices'] == ['/dev/full'] and result['problems']


def test_uvm_loaded_without_its_nodes(node, run_module):
    node([name for name in H200 if 'uvm' not in name], LOADED)
    result = run_module(gpu_device_nodes, {})
    assert result['failed'] and 'nvidia-modprobe -u -c=0' in result['msg']


@pytest.mark.parametrize('gpus', ['0', [0, 'x'], {'a': 1}])
def test_gpus_must_be_all_or_indexes(node, run_module, gpus):
    node(H200, LOADED)
    result = run_module(gpu_device_nodes, {'gpus': gpus})
    assert result['failed'] and "gpus must be 'all' or a list of GPU indexes" in result['msg']
