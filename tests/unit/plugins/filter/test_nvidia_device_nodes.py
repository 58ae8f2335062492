"""Which NVIDIA device nodes a container gets and what is wrong with them (filter nvidia_device_nodes, read by
proxmox_container's preflight; tests/unit/test_proxmox_container_gpus.py runs the role itself on real nodes)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.nvidia_device_nodes import FilterModule, nvidia_device_nodes

H200 = ['/dev/nvidia1', '/dev/nvidia0', '/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools',
        '/dev/nvidia-caps/nvidia-cap2', '/dev/nvidia-caps/nvidia-cap1', '/dev/nvidia-modeset']
LOADED = 'Character devices:\n195 nvidia\n195 nvidiactl\n238 nvidia-uvm\n241 nvidia-caps\n\nBlock devices:\n  8 sd\n'
NOT_LOADED = 'Character devices:\n  1 mem\n\nBlock devices:\n  8 sd\n'
SHARED = ['/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidiactl', '/dev/nvidia-caps/nvidia-cap1',
          '/dev/nvidia-caps/nvidia-cap2']


def test_the_filter_is_registered():
    assert set(FilterModule().filters()) == {'nvidia_device_nodes'}


def test_all_gpus_then_the_shared_nodes():
    nodes = nvidia_device_nodes(H200, 'all', LOADED)
    assert nodes['devices'] == ['/dev/nvidia0', '/dev/nvidia1'] + SHARED
    assert nodes['gpus'] == ['/dev/nvidia0', '/dev/nvidia1'] and nodes['problems'] == []
    assert nodes['found'] == sorted(H200)


def test_the_gpus_asked_for():
    assert nvidia_device_nodes(H200, [1], LOADED)['devices'] == ['/dev/nvidia1'] + SHARED


def test_a_missing_gpu_is_named():
    nodes = nvidia_device_nodes(H200, [0, 3], LOADED)
    assert nodes['gpus'] == ['/dev/nvidia0'] and nodes['gpus_missing'] == ['/dev/nvidia3']
    assert nodes['problems'] == ['GPU device nodes missing: /dev/nvidia3.']


def test_a_loaded_uvm_driver_without_its_nodes():
    nodes = nvidia_device_nodes([p for p in H200 if 'uvm' not in p], 'all', LOADED)
    assert nodes['problems'] == ["the nvidia-uvm driver is loaded (major 238) but /dev/nvidia-uvm does not exist: run "
                                 "'nvidia-modprobe -u -c=0' on the node to create them."]


def test_no_driver_and_no_nodes():
    nodes = nvidia_device_nodes([], 'all', NOT_LOADED)
    assert nodes['devices'] == [] and nodes['gpus'] == []
    assert nodes['problems'] == ["the nvidia kernel module is not loaded (no 'nvidia' in /proc/devices).",
                                 '/dev/nvidiactl is missing.']


def test_no_gpu_node_passes_no_shared_node_either():
    assert nvidia_device_nodes(['/dev/nvidiactl'], 'all', LOADED)['devices'] == []


@pytest.mark.parametrize('gpus', ['0', None, {'0': 1}])
def test_gpus_that_are_neither_all_nor_a_list_are_refused(gpus):
    with pytest.raises(AnsibleFilterError, match='gpus'):
        nvidia_device_nodes(H200, gpus, LOADED)
