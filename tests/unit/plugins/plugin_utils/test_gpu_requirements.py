"""gpu_check's requirements (plugin_utils/gpu_requirements.py, the action plugin gpu_requirements):
each rule that is broken is named with the host, the GPU, the figure and the variable, in the words
molecule/gpu_check's verify expects; idle GPUs that meet every rule give no message and publish the
facts."""

from __future__ import annotations

import copy
from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.eagle3.extraction.plugins.action.gpu_requirements import ActionModule
from ansible_collections.eagle3.extraction.plugins.plugin_utils.gpu_requirements import gpu_problems

UUID0 = 'GPU-c78b0a93-9298-0633-b6f0-dd3c6ad32227'
UUID1 = 'GPU-c7824c5d-3680-98ef-652f-1e29b7908b6d'
IDLE = {
    'driver_version': '580.159.04', 'nvidia_smi_version': '580.159.04', 'gpu_count': 2,
    'gpus': [{'index': 0, 'uuid': UUID0, 'name': 'NVIDIA H200', 'memory_used_mib': 0, 'persistence_mode': 'Enabled'},
             {'index': 1, 'uuid': UUID1, 'name': 'NVIDIA H200', 'memory_used_mib': 0, 'persistence_mode': 'Enabled'}],
    'processes': [], 'interconnect': 'nvlink', 'summary': '2 x NVIDIA H200',
}
EVERY_LIMIT = {'driver_version': '580.159.04', 'driver_version_min': '580', 'gpu_count': 2, 'gpu_model': 'NVIDIA H200',
               'persistence_mode': True, 'memory_used_max_mib': 0, 'require_idle': True, 'reclaim': False}


def busy():
    nvidia = copy.deepcopy(IDLE)
    for gpu in nvidia['gpus']:
        gpu['memory_used_mib'] = 21007
    nvidia['processes'] = [{'pid': 4242, 'process_name': 'python3', 'used_memory_mib': 20998, 'gpu_index': index,
                            'gpu_uuid': uuid} for index, uuid in ((0, UUID0), (1, UUID1))]
    return nvidia


def test_idle_gpus_that_meet_every_limit_give_no_message():
    assert gpu_problems('ct1', IDLE, EVERY_LIMIT) == []


@pytest.mark.parametrize('limits, expected', [
    ({'driver_version': '550.144'}, ['GPUs 0, 1 of ct1 run driver 580.159.04; gpu_check_driver_version pins 550.144.']),
    ({'gpu_count': 3}, ['ct1 has 2 GPU(s) (GPU 0 NVIDIA H200 %s, GPU 1 NVIDIA H200 %s); gpu_check_gpu_count is 3. '
                        'Check that every /dev/nvidiaN is passed into the container.' % (UUID0, UUID1)]),
    ({'gpu_model': 'NVIDIA H200 NVL'}, ['GPU 0 (%s) of ct1 is "NVIDIA H200"; gpu_check_gpu_model is "NVIDIA H200 NVL".'
                                        % UUID0,
                                        'GPU 1 (%s) of ct1 is "NVIDIA H200"; gpu_check_gpu_model is "NVIDIA H200 NVL".'
                                        % UUID1]),
])
def test_each_rule_names_the_gpus_the_figure_and_the_variable(limits, expected):
    assert gpu_problems('ct1', IDLE, dict(EVERY_LIMIT, **limits)) == expected


def test_the_minimum_driver_compares_versions_not_text():
    old = dict(IDLE, driver_version='575.57.08')
    assert gpu_problems('ct1', old, {'driver_version_min': '580'}) == [
        'GPUs 0, 1 of ct1 run driver 575.57.08; gpu_check_driver_version_min is 580.']
    assert gpu_problems('ct1', dict(IDLE, driver_version='1000.1'), {'driver_version_min': '580'}) == []


def test_no_gpu_is_named_before_anything_else():
    none = dict(IDLE, gpu_count=0, gpus=[])
    assert gpu_problems('ct1', none, EVERY_LIMIT) == [
        'nvidia-smi on ct1 lists no GPU. Check that the /dev/nvidia* device nodes are passed into the container '
        '(eagle3.extraction.proxmox_container).']


def test_busy_gpus_name_each_gpu_its_mib_the_limit_the_holder_and_the_reclaim():
    problems = gpu_problems('ct1', busy(), EVERY_LIMIT)
    text = ' '.join(problems)
    for part in ('GPU 0 (%s) of ct1 has 21007 MiB in use; gpu_check_memory_used_max_mib is 0.' % UUID0,
                 'GPU 1 (%s) of ct1 has 21007 MiB in use; gpu_check_memory_used_max_mib is 0.' % UUID1,
                 'Held by PID 4242 (python3, 20998 MiB).', 'gpu_check_reclaim: true kills the holders first.',
                 'No compute process may run on the GPUs of ct1: PID 4242 (python3) holds 20998 MiB on GPU 0'):
        assert part in text
    assert len(problems) == 3


def test_a_holder_out_of_sight_and_the_reclaims_own_report():
    nvidia = busy()
    nvidia['processes'] = []
    problems = gpu_problems('ct1', nvidia, dict(EVERY_LIMIT, reclaim=True, reclaimed={'msg': 'GPU 0 still holds'}))
    assert 'No compute process is visible from here' in problems[0]
    assert problems[0].endswith('The reclaim (gpu_check_reclaim) reported: GPU 0 still holds')
    assert 'kills the holders first' not in problems[0]


def test_a_reclaim_in_check_mode_leaves_the_memory_and_processes_out():
    simulated = {'would_kill': [4242], 'killed': []}
    assert gpu_problems('ct1', busy(), dict(EVERY_LIMIT, reclaim=True, reclaimed=simulated)) == []
    assert gpu_problems('ct1', busy(), dict(EVERY_LIMIT, require_idle=False)) == []


def test_persistence_mode_off_is_named_per_gpu():
    nvidia = copy.deepcopy(IDLE)
    nvidia['gpus'][1]['persistence_mode'] = 'Disabled'
    assert gpu_problems('ct1', nvidia, EVERY_LIMIT) == [
        'GPU 1 (%s) of ct1 has persistence mode Disabled; gpu_check_persistence_mode requires Enabled. Enable it on '
        'the hypervisor (nvidia-smi -pm 1, or the nvidia-persistenced service).' % UUID1]


def test_the_hypervisors_kernel_module():
    missing = {'failed': True, 'msg': 'No NVIDIA kernel module is loaded here (no /proc/driver/nvidia/version)'}
    assert gpu_problems('ct1', IDLE, {'hypervisor': 'pve1', 'hypervisor_result': missing})[0].startswith(
        'Hypervisor pve1 (gpu_check_hypervisor) of ct1: No NVIDIA kernel module is loaded here')
    other = {'ansible_facts': {'nvidia': {'kernel_module': {'version': '570.1'}}}}
    assert gpu_problems('ct1', IDLE, {'hypervisor': 'pve1', 'hypervisor_result': other}) == [
        'GPUs 0, 1 of ct1 run driver 580.159.04 with nvidia-smi 580.159.04, but its hypervisor pve1 '
        '(gpu_check_hypervisor) has kernel module 570.1. Install exactly 570.1 in the container (the .run installer '
        'with --no-kernel-module).']
    same = {'ansible_facts': {'nvidia': {'kernel_module': {'version': '580.159.04'}}}}
    assert gpu_problems('ct1', IDLE, {'hypervisor': 'pve1', 'hypervisor_result': same}) == []


def run_action(args):
    task = mock.MagicMock(args=args, async_val=0, check_mode=False, diff=False,
                          action='eagle3.extraction.gpu_requirements')
    plugin = ActionModule(task, mock.MagicMock(), mock.MagicMock(check_mode=False), DataLoader(),
                          Templar(loader=DataLoader(), variables={}), None)
    return plugin.run(task_vars={'inventory_hostname': 'ct1'})


def test_the_action_publishes_the_facts_or_fails_once_with_every_message():
    passed = run_action(dict(EVERY_LIMIT, nvidia=IDLE))
    assert not passed.get('failed') and passed['problems'] == []
    assert (passed['gpu_check_interconnect'], passed['gpu_check_gpus'], passed['gpu_check_summary']) == (
        'nvlink', IDLE['gpus'], '2 x NVIDIA H200')
    failed = run_action(dict(EVERY_LIMIT, nvidia=busy()))
    assert failed['failed'] and 'gpu_check_summary' not in failed and len(failed['problems']) == 3
    assert failed['msg'] == ' '.join(failed['problems'])
    # its own arguments are checked first
    assert 'gpu_count' in run_action({'nvidia': IDLE, 'gpu_count': 'many'})['msg']
