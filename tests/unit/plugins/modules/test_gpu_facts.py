"""gpu_facts in-process against the nvidia-smi stand-in (lab/standins/nvidia_smi): the facts of
a healthy driver, the cause of a broken one, and a wedged driver whose nvidia-smi never answers,
which must fail in bounded time naming the command and the timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import gpu_facts

REPO = Path(__file__).resolve().parents[4]
STANDIN = REPO / 'lab' / 'standins' / 'nvidia_smi' / 'nvidia-smi'


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """Point the stand-in at a private config; returns a function that sets its mode."""
    conf = tmp_path / 'standin.conf'
    conf.write_text('')
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_CONF', str(conf))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_STATE', str(tmp_path / 'state.json'))
    monkeypatch.setenv('NVIDIA_SMI_STANDIN_DATA', str(REPO / 'lab' / 'fixtures' / 'nvidia-smi'))

    def set_mode(mode):
        conf.write_text('mode=%s\n' % mode)
    return set_mode


def test_a_healthy_driver_gives_the_gpus(standin, run_module):
    result = run_module(gpu_facts, {'nvidia_smi_path': str(STANDIN)})
    assert 'failed' not in result, result.get('msg')
    nvidia = result['ansible_facts']['nvidia']
    assert nvidia['gpu_count'] == 2 and nvidia['driver_version'] == '580.159.04'
    assert nvidia['interconnect'] == 'nvlink'
    assert nvidia['summary'] == '2 x NVIDIA H200'


def test_a_driver_that_is_not_loaded_names_the_cause(standin, run_module):
    standin('driver-not-loaded')
    result = run_module(gpu_facts, {'nvidia_smi_path': str(STANDIN)})
    assert result['failed'] is True and result['cause'] == 'driver_not_loaded'


def test_a_hanging_nvidia_smi_fails_in_bounded_time(standin, run_module):
    standin('hang')
    began = time.monotonic()
    result = run_module(gpu_facts, {'nvidia_smi_path': str(STANDIN), 'command_timeout': 1})
    assert time.monotonic() - began < 15
    assert result['failed'] is True and result['cause'] == 'timeout'
    assert '`%s` did not finish within its timeout of 1.0 seconds' % STANDIN in result['msg']


def test_a_missing_nvidia_smi_names_the_option(tmp_path, run_module):
    result = run_module(gpu_facts, {'nvidia_smi_path': str(tmp_path)})
    assert result['failed'] is True and result['cause'] == 'missing_binary'
    assert 'at nvidia_smi_path %s' % tmp_path in result['msg']
