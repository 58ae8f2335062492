"""plugin_utils/host_plan.py: each host's plan, the rules that were YAML (the merged flags, the environment,
the local tensor-parallel size, the leftover patterns, the job's shards and server URL), and the one claim
that makes it one owner: extract.yml's inventory check and the lookup the roles read give the same plan for
every host. In-process."""

from __future__ import annotations

import os
import re
from unittest import mock

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.eagle3.extraction.plugins.action import inventory_check
from ansible_collections.eagle3.extraction.plugins.lookup.host_plan import LookupModule
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import (
    FROM_PLAN, NCCL_PCIE, STAMP, PlanError, leftover_patterns, plan)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import COLLECTION, spec_defaults

FLEET = {
    'ct1': {'ansible_host': '10.0.0.1', 'sglang_server_host': '0.0.0.0', 'sglang_server_port': 30000,
            'sglang_server_flags': {'enable-metrics': True}, 'sglang_server_tp_size': 8, 'sglang_server_interconnect': 'pcie'},
    'ct2': {'ansible_host': '10.0.0.2', 'sglang_server_name': 'alpha', 'sglang_server_tp_size': 4,
            'sglang_server_interconnect': 'nvlink', 'sglang_server_socket_ifname': 'eth1',
            'sglang_server_env': {'NCCL_DEBUG': 'INFO', 'SGL_FORCE_SHUTDOWN': None}},
    'ct3': {'ansible_host': '10.0.0.3', 'sglang_server_name': 'duo', 'sglang_server_node_rank': 1,
            'sglang_server_host': '0.0.0.0', 'sglang_server_port': 8100, 'sglang_server_tp_size': 16,
            'sglang_server_interconnect': 'nvlink'},
    'ct4': {'ansible_host': '10.0.0.4', 'sglang_server_name': 'duo', 'sglang_server_node_rank': 0,
            'sglang_server_host': '0.0.0.0', 'sglang_server_port': 8100, 'sglang_server_tp_size': 16,
            'sglang_server_interconnect': 'nvlink', 'sglang_server_dump_dir': '/dev/shm/duo'},
}


def test_the_flags_as_the_config_file_holds_them():
    flags = plan(FLEET, 'ct4')['server']['flags']
    # the role's four, then sglang_server_flags (the spec's default here), then the multi-node ones
    assert list(flags)[:4] == ['model-path', 'host', 'port', 'tp-size']
    assert (flags['host'], flags['port'], flags['tp-size'], flags['mem-fraction-static']) == ('0.0.0.0', 8100, 16, 0.88)
    assert (flags['nnodes'], flags['node-rank'], flags['dist-init-addr']) == (2, 0, '10.0.0.4:5000')
    # a host's flags replace the default flags whole; the four come from their variables alone
    # (and the flag the job's capture check needs, while it is on)
    assert plan(FLEET, 'ct1')['server']['flags'] == {'model-path': '', 'host': '0.0.0.0', 'port': 30000, 'tp-size': 8,
                                                     'enable-metrics': True, 'enable-return-hidden-states': True}


@pytest.mark.parametrize('values, returned', [
    ({}, True), ({'extraction_job_capture_check': False}, None), ({'extraction_job_mode': 'online'}, None),
    # the user's own value stands
    ({'extraction_job_capture_check': False, 'sglang_server_flags': {'enable-return-hidden-states': True}}, True)])
def test_the_server_returns_hidden_states_while_the_jobs_capture_check_is_on(values, returned):
    # SGLang answers return_hidden_states only with --enable-return-hidden-states: the check needs it
    assert plan({'ct1': values}, 'ct1')['server']['flags'].get('enable-return-hidden-states') is returned


@pytest.mark.parametrize('values, given', [
    ({}, True), ({'sglang_server_enable_metrics': True}, True), ({'sglang_server_enable_metrics': 'yes'}, True),
    ({'sglang_server_enable_metrics': False}, None), ({'sglang_server_enable_metrics': 'false'}, None),
    # the user's own value stands, either way
    ({'sglang_server_enable_metrics': False, 'sglang_server_flags': {'enable-metrics': True}}, True),
    ({'sglang_server_flags': {'enable-metrics': False}}, False)])
def test_the_server_serves_its_metrics_while_sglang_server_enable_metrics_is_on(values, given):
    # SGLang serves /metrics only when started with --enable-metrics
    assert plan({'ct1': values}, 'ct1')['server']['flags'].get('enable-metrics') is given


@pytest.mark.parametrize('flag, variable', [('port', 'sglang_server_port'), ('host', 'sglang_server_host'),
                                            ('tp-size', 'sglang_server_tp_size'),
                                            ('model-path', 'sglang_server_model_path')])
def test_no_plan_is_made_of_flags_that_set_a_core_flag(flag, variable):
    # the config file and the address could disagree: the plan refuses, naming the variable to set
    with pytest.raises(PlanError) as caught:
        plan({'ct1': {'sglang_server_flags': {flag: 1}}}, 'ct1')
    assert str(caught.value) == "ct1: sglang_server_flags['%s'] is set; --%s is %s's: set that instead" % (
        flag, flag, variable)


def test_the_tensor_parallel_size_over_the_nodes():
    assert [(plan(FLEET, h)['server']['tp_size'], plan(FLEET, h)['server']['local_tp']) for h in FLEET] == [
        (8, 8), (4, 4), (16, 8), (16, 8)]
    # left to the GPUs gpu_check counts: not known to the inventory check
    assert plan({'ct9': {}}, 'ct9')['server']['local_tp'] is None


def test_the_environment():
    assert plan(FLEET, 'ct1')['server']['environment'] == dict(
        NCCL_PCIE, SGLANG_HS_DUMP_DIR='/dev/shm/sglang_hs', SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN='1',
        SGL_FORCE_SHUTDOWN='1')
    # no PCIe values on NVLink; the socket interface for NCCL and Gloo; sglang_server_env over them, null drops one
    assert plan(FLEET, 'ct2')['server']['environment'] == {
        'SGLANG_HS_DUMP_DIR': '/dev/shm/sglang_hs', 'SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN': '1',
        'NCCL_SOCKET_IFNAME': 'eth1', 'GLOO_SOCKET_IFNAME': 'eth1', 'NCCL_DEBUG': 'INFO'}
    assert plan(FLEET, 'ct4')['server']['environment']['SGLANG_HS_DUMP_DIR'] == '/dev/shm/duo'
    assert plan({'ct9': {}}, 'ct9')['server']['environment'] is None


def test_the_leftover_patterns_match_a_launcher_and_not_a_bystander():
    patterns = [re.compile(p) for p in leftover_patterns('my.server')]
    assert any(p.search('/root/ml-env/bin/python -m my.server --config x') for p in patterns)
    assert any(p.search('sglang::scheduler_TP0') for p in patterns)
    assert not any(p.search('/usr/bin/python3 -m myXserver') for p in patterns)


def test_the_jobs_shards_one_a_server_by_name_and_its_server_url():
    jobs = dict((host, plan(FLEET, host)['job']) for host in FLEET)
    # the servers sorted: alpha (ct2), ct1, duo (ct3, ct4)
    assert [(jobs[h]['shards'], jobs[h]['shard_count']) for h in FLEET] == [([1], 3), ([0], 3), ([2], 3), ([2], 3)]
    assert jobs['ct1']['server_url'] == 'http://127.0.0.1:30000'
    assert (jobs['ct3']['server_url'], jobs['ct3']['dump_dir']) == ('http://10.0.0.4:8100', '/dev/shm/sglang_hs')
    assert jobs['ct4']['output_dirs'] == {'2': '/srv/eagle3-extraction/extraction/shard-2-of-3'}
    given = plan({'ct1': {'extraction_job_shard_indexes': ['0', 2], 'extraction_job_shard_count': '4',
                          'extraction_job_name': 'sharegpt', 'extraction_job_output_root': '/data/'}}, 'ct1')['job']
    assert (given['shards'], given['shard_count'], given['dir']) == ([0, 2], 4, '/data/sharegpt')


def test_the_interpreter_and_the_stamp():
    assert plan(FLEET, 'ct1')['python'] == '/root/ml-env/bin/python'
    assert plan({'a': {'ml_env_path': '/opt/v/'}}, 'a')['python'] == '/opt/v/bin/python'
    assert plan({'a': {'ml_env_python_bin': '/srv/p/bin/python'}}, 'a')['python'] == '/srv/p/bin/python'
    assert plan(FLEET, 'ct1')['stamp'] == STAMP


def test_a_value_no_plan_can_be_made_of_names_the_host():
    with pytest.raises(PlanError, match=r"^ct1: sglang_server_port='x' is not a port"):
        plan({'ct1': {'sglang_server_port': 'x'}}, 'ct1')


def test_the_defaults_that_read_the_plan_are_the_plans():
    """Each FROM_PLAN variable's default is a lookup of this plan, in the spec and in defaults/main.yml."""
    with open(os.path.join(COLLECTION, 'roles', 'extraction_job', 'defaults', 'main.yml'), encoding='utf-8') as f:
        defaults = yaml.safe_load(f)
    for name, default in spec_defaults('extraction_job', FROM_PLAN).items():
        assert default == defaults[name] and "lookup('eagle3.extraction.host_plan')" in default, name


def role_view(host):
    """What a role on ``host`` passes the lookup: the roles' defaults, the inventory's values over them."""
    variables = {}
    for role in ('proxmox_container', 'gpu_check', 'ml_env', 'sglang_patch', 'sglang_server', 'extraction_job'):
        with open(os.path.join(COLLECTION, 'roles', role, 'defaults', 'main.yml'), encoding='utf-8') as f:
            for name, value in (yaml.safe_load(f) or {}).items():
                variables[name] = trust_as_template(value) if isinstance(value, str) else value
    variables.update(FLEET[host])
    variables.update(inventory_hostname=host, hostvars=FLEET, groups={'extraction_servers': list(FLEET)})
    loader = DataLoader()
    return LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables)).run([], variables)[0]


def test_the_inventory_check_and_the_roles_make_the_same_plan():
    task = mock.MagicMock()
    task.args = {'hosts': list(FLEET), 'hypervisors': ['pve1'], 'rollout': {}}
    hostvars = dict((host, dict(values, proxmox_container_node='pve1', proxmox_container_vmid=101 + index,
                                sglang_server_model_path='/srv/m'))
                    for index, (host, values) in enumerate(FLEET.items()))
    hostvars['pve1'] = {}
    action = inventory_check.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=DataLoader(),
                                          templar=Templar(loader=DataLoader(), variables={}), shared_loader_obj=None)
    with mock.patch.object(inventory_check.ControllerCheck.__mro__[1], 'run', return_value={}):
        result = action.run(task_vars={'hostvars': hostvars})
    assert not result.get('failed'), result.get('msg')
    FLEET_WITH_MODEL = dict((host, dict(values, sglang_server_model_path='/srv/m')) for host, values in FLEET.items())
    with mock.patch.dict(FLEET, FLEET_WITH_MODEL):
        for host in FLEET:
            assert result['plans'][host] == role_view(host), host


@pytest.mark.parametrize('name, value', [
    ('extraction_job_name', '../other'), ('extraction_job_name', 'x/../../other'), ('extraction_job_name', 'job\n'),
    ('extraction_job_output_root', 'relative/root'), ('extraction_job_output_root', '/srv/a/../b'),
])
def test_no_job_dir_is_made_of_a_path_in_the_name_or_a_bad_root(name, value):
    """status.yml, verify.yml and repair.yml read the job's dir from the plan without the role's first check: a
    name that is a path would have them read (and verify pass on) another job's output."""
    with pytest.raises(PlanError, match=r'^ct1: %s=%s is ' % (name, re.escape(repr(value)))):
        plan({'ct1': {name: value}}, 'ct1')
    assert plan({'ct1': {'extraction_job_name': 2024}}, 'ct1')['job']['dir'] == '/srv/eagle3-extraction/2024'
