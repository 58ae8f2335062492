"""Bad option values of port_reclaim and process_reclaim fail before anything is
read or signalled, with a message naming the option and what is allowed.
The modules run in-process (the run_module fixture of tests/unit/conftest.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

from ansible_collections.eagle3.extraction.plugins.modules import port_reclaim, process_reclaim


@pytest.mark.parametrize('args, message', [
    ({'port': 0}, 'port: 0 is out of range; give a number from 1 to 65535'),
    ({'port': 70000}, 'port: 70000 is out of range; give a number from 1 to 65535'),
    ({'port': 8000, 'address': 'localhost'}, "address: 'localhost' is not an IPv4 or IPv6 address"),
    ({'port': 8000, 'signal_timeout': -1}, 'signal_timeout: -1.0 is out of range; give a number from 0 to 3600 seconds'),
    ({'port': 8000, 'kill_timeout': -0.5}, 'kill_timeout: -0.5 is out of range'),
    ({'port': 8000, 'vmid': 7}, 'vmid: 7 is not a Proxmox container id; give an integer from 100 to 999999999'),
])
def test_port_reclaim_bad_values(args, message, run_module):
    result = run_module(port_reclaim, args)
    assert result['failed'] is True and message in result['msg']


def test_port_reclaim_reports_every_bad_value_at_once(run_module):
    result = run_module(port_reclaim, {'port': 70000, 'address': 'x', 'vmid': 1})
    assert 'port: 70000' in result['msg'] and "address: 'x'" in result['msg'] and 'vmid: 1 ' in result['msg']


@pytest.mark.parametrize('args, message', [
    ({'match': ['sglang::(']}, "match[0]: 'sglang::(' is not a valid regular expression"),
    ({'match': []}, 'match is empty and gpu_holders is false'),
    ({'exclude': [0]}, 'exclude[0]: 0 is out of range; give a number from 1 to 4194304 (a PID)'),
    ({'gpu_memory_max_mib': -1}, 'gpu_memory_max_mib: -1 is out of range'),
    ({'gpu_wait_timeout': -1}, 'gpu_wait_timeout: -1.0 is out of range'),
    ({'nvidia_smi_path': '/nonexistent/nvidia-smi'}, "nvidia_smi_path: '/nonexistent/nvidia-smi' does not exist"),
    ({'vmid': 1000000000}, 'vmid: 1000000000 is not a Proxmox container id'),
])
def test_process_reclaim_bad_values(args, message, run_module):
    result = run_module(process_reclaim, args)
    assert result['failed'] is True and message in result['msg']


def test_vmid_off_a_hypervisor_says_where_to_run(run_module, monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    result = run_module(port_reclaim, {'port': 8000, 'vmid': 101})
    assert result['failed'] is True
    assert 'pct was not found; run the module on the Proxmox hypervisor that hosts container 101' in result['msg']


def test_gpu_wait_without_nvidia_smi_fails_clearly(run_module, monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    result = run_module(process_reclaim, {'match': [r'^no-such-process-\d+$'], 'gpu_memory_max_mib': 0})
    assert result['failed'] is True and 'nvidia-smi was not found' in result['msg']


def test_broken_driver_fails_a_gpu_wait_with_the_cause(run_module, tmp_path, monkeypatch):
    standin = REPO / 'lab' / 'standins' / 'nvidia_smi' / 'nvidia-smi'
    if not standin.exists():
        pytest.skip('the stand-in nvidia-smi is missing')
    conf = tmp_path / 'standin.conf'
    conf.write_text('mode=driver-not-loaded\n')
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_CONF', str(conf))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_STATE', str(tmp_path / 'state.json'))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_DATA', str(REPO / 'lab' / 'fixtures' / 'nvidia-smi'))
    result = run_module(process_reclaim, {'match': [r'^no-such-process-\d+$'], 'gpu_memory_max_mib': 0,
                                          'nvidia_smi_path': str(standin)})
    assert result['failed'] is True
    assert 'nvidia-smi does not work' in result['msg'] and 'NVIDIA driver not loaded' in result['msg']


def test_a_hanging_nvidia_smi_fails_a_gpu_wait_in_bounded_time(run_module, tmp_path, monkeypatch):
    standin = REPO / 'lab' / 'standins' / 'nvidia_smi' / 'nvidia-smi'
    conf = tmp_path / 'standin.conf'
    conf.write_text('mode=hang\n')
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_CONF', str(conf))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_STATE', str(tmp_path / 'state.json'))
    began = time.monotonic()
    result = run_module(process_reclaim, {'match': [r'^no-such-process-\d+$'], 'gpu_memory_max_mib': 0,
                                          'nvidia_smi_path': str(standin), 'command_timeout': 1})
    assert time.monotonic() - began < 15
    assert result['failed'] is True
    assert 'did not finish within its timeout of 1.0 seconds' in result['msg'] and str(standin) in result['msg']
    assert not result.get('killed')
