# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online mode's part of the host plan: one declaration of the job where each part lives, everything else
derived once; and what cannot work named before anything starts."""

from __future__ import annotations

import ast
import copy
import os

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import plan
from ansible_collections.eagle3.extraction.plugins.plugin_utils.online_plan import errors, in_use

SERVER = {'extraction_job_mode': 'online', 'extraction_job_name': 'demo', 'sglang_server_port': 30000,
          'sglang_server_host': '0.0.0.0', 'sglang_server_model_path': '/srv/models/demo',
          'sglang_server_env': {'SGLANG_HS_LAYER_IDS': '1,2,3'}}
SERVERS = {'ct1': dict(SERVER, ansible_host='10.200.0.101'), 'ct2': dict(SERVER, ansible_host='10.200.0.102')}
ONLINE = {'mooncake_masters': {'ct3': {'ansible_host': '10.200.0.103'}},
          'online_trainers': {'ct3': {'ansible_host': '10.200.0.103', 'online_training_job': 'demo',
                                      'online_training_mooncake_master': 'ct3'}}}


def _inventory(changes=None):
    servers, online = copy.deepcopy(SERVERS), copy.deepcopy(ONLINE)
    for (host, name), value in (changes or {}).items():
        group = servers if host in servers else online[name.startswith('mooncake') and 'mooncake_masters'
                                                       or 'online_trainers']
        group[host][name] = value
    return servers, online


def test_a_server_gets_its_gateway_the_job_s_urls_and_its_mooncake_environment():
    found = plan(SERVERS, 'ct1', ONLINE)['online']
    assert found['job'] == 'demo' and found['trainer'] == 'ct3'
    assert found['server_urls'] == ['http://10.200.0.101:30100', 'http://10.200.0.102:30100']
    assert found['aux_layer_ids'] == [1, 2, 3]
    assert found['master']['master_server_address'] == '10.200.0.103:35551'
    assert found['master']['metadata_server'] == 'http://10.200.0.103:35880/metadata'
    assert found['master']['segment_bytes'] == 32 << 30   # the role's default
    # its own address, as the peers reach it: not a bridge's, not the master's
    assert found['environment']['MC_TCP_BIND_ADDRESS'] == '10.200.0.101'
    assert found['environment']['MOONCAKE_LOCAL_HOSTNAME'] == '10.200.0.101'
    assert found['environment']['MOONCAKE_MASTER_SERVER_ADDR'] == '10.200.0.103:35551'
    gateway = found['gateway']
    assert gateway['url'] == 'http://10.200.0.101:30100' and gateway['listen_host'] == '0.0.0.0'
    assert gateway['server_url'] == plan(SERVERS, 'ct1', ONLINE)['job']['server_url']
    assert gateway['unit'] == 'eagle3-capture-gateway@demo.service'


def test_the_trainer_has_no_server_and_the_same_urls_and_master():
    found = plan(SERVERS, 'ct3', ONLINE)
    assert found['server'] is None and found['job'] is None
    assert found['online']['server_urls'] == plan(SERVERS, 'ct2', ONLINE)['online']['server_urls']
    assert found['online']['master'] == plan(SERVERS, 'ct1', ONLINE)['online']['master']
    assert found['online']['environment']['MC_TCP_BIND_ADDRESS'] == '10.200.0.103'
    assert found['online']['gateway'] is None


def test_a_files_mode_inventory_has_no_online_section_and_no_errors():
    servers = dict((host, dict(values, extraction_job_mode='files')) for host, values in SERVERS.items())
    assert plan(servers, 'ct1')['online'] is None
    assert plan(servers, 'ct1', {})['job']['shards'] == [0]
    assert errors(servers, {}) == []


def test_a_valid_online_inventory_has_no_errors_and_uses_its_master_and_trainer():
    assert errors(SERVERS, ONLINE) == []
    assert in_use(SERVERS, ONLINE) == {'mooncake_masters': ['ct3'], 'online_trainers': ['ct3']}


def test_the_trainer_of_a_job_in_the_files_mode_is_idle_not_refused():
    servers = dict((host, dict(values, extraction_job_mode='files')) for host, values in SERVERS.items())
    assert errors(servers, ONLINE) == []
    assert in_use(servers, ONLINE) == {'mooncake_masters': [], 'online_trainers': []}
    assert plan(servers, 'ct3', ONLINE)['online'] is None


@pytest.mark.parametrize('changes, expected', [
    ({('ct3', 'online_training_job'): 'other'}, 'job demo (extraction_job_mode=online on ct1, ct2) needs one trainer'),
    ({('ct3', 'online_training_job'): 'other'}, "ct3: online_training_job='other' names no job"),
    ({('ct3', 'online_training_mooncake_master'): 'ct9'},
     "online_training_mooncake_master='ct9' is not a host of the group mooncake_masters"),
    ({('ct2', 'sglang_server_model_path'): '/srv/models/other'},
     "job demo: sglang_server_model_path='/srv/models/other' on ct2 but '/srv/models/demo' on ct1"),
    ({('ct2', 'sglang_server_env'): {'SGLANG_HS_LAYER_IDS': '1,2,4'}},
     'job demo: sglang_server_env.SGLANG_HS_LAYER_IDS=[1, 2, 4] on ct2 but [1, 2, 3] on ct1'),
    ({('ct1', 'extraction_job_gateway_port'): 30000},
     'ct1: extraction_job_gateway_port=30000 and sglang_server_port=30000: two services of the host would bind'),
    ({('ct3', 'mooncake_master_host'): '127.0.0.1'},
     'the Mooncake master on ct3 advertises 127.0.0.1, which its servers and trainer on other hosts cannot reach'),
    ({('ct1', 'sglang_server_host'): '127.0.0.1'},
     "sglang_server_host='127.0.0.1' on ct1: its gateway listens where the server does"),
])
def test_what_cannot_work_is_named_before_anything_starts(changes, expected):
    found = errors(*_inventory(changes))
    assert any(expected in message for message in found), found


def test_a_master_sharing_a_server_s_host_may_not_take_its_ports():
    servers, online = _inventory()
    online['mooncake_masters'] = {'ct1': {'ansible_host': '10.200.0.101', 'mooncake_master_rpc_port': 30100}}
    online['online_trainers']['ct3']['online_training_mooncake_master'] = 'ct1'
    found = errors(servers, online)
    assert any('ct1: extraction_job_gateway_port=30100 and mooncake_master_rpc_port=30100' in message
               for message in found), found


def _trainer_on_ct1(trainer_gpus, **server):
    """The job's trainer moved onto ct1, a server host, on ``trainer_gpus``; ct1's server changed by ``server``."""
    servers, online = _inventory()
    servers['ct1'].update(server)
    online['online_trainers'] = {'ct1': dict(online['online_trainers']['ct3'], ansible_host='10.200.0.101',
                                             online_training_gpus=trainer_gpus)}
    return errors(servers, online)


@pytest.mark.parametrize('trainer_gpus, server, shared', [
    (['0'], {}, "GPU 0 with the SGLang server of the host (every GPU of the host)"),
    (['6', '7'], {'sglang_server_tp_size': 8}, 'GPU 6,7 with the SGLang server of the host (GPUs 0,1,2,3,4,5,6,7)'),
    (['3'], {'sglang_server_tp_size': '4', 'sglang_server_flags': {'base-gpu-id': 2}}, 'GPU 3 with'),
    (['1'], {'sglang_server_env': {'CUDA_VISIBLE_DEVICES': '0,1'}}, '(GPUs 0,1)'),
])
def test_a_trainer_on_a_gpu_of_its_hosts_server_is_refused(trainer_gpus, server, shared):
    """The server's unit would restart beside the trainer into the memory the trainer left (SGLang sizes its
    memory against what is free at its start) and fail every time."""
    found = _trainer_on_ct1(trainer_gpus, **server)
    assert any(message.startswith('ct1: online_training_gpus=%r shares ' % trainer_gpus) and shared in message
               and 'sglang_server_env.CUDA_VISIBLE_DEVICES' in message for message in found), found


@pytest.mark.parametrize('trainer_gpus, server', [
    (['4', '5', '6', '7'], {'sglang_server_tp_size': 4}),
    (['7'], {'sglang_server_tp_size': 4, 'sglang_server_flags': {'base-gpu-id': 2}}),
    (['0'], {'sglang_server_env': {'CUDA_VISIBLE_DEVICES': '1,2'}}),
    ([], {}),   # a test run's trainer, on the CPU
])
def test_a_trainer_beside_its_hosts_server_on_gpus_of_its_own_is_allowed(trainer_gpus, server):
    assert not [m for m in _trainer_on_ct1(trainer_gpus, **server) if 'online_training_gpus' in m]


def test_without_sglang_hs_layer_ids_the_trainer_is_told_the_capture_s_own_default():
    servers = dict((host, dict(values, sglang_server_env={})) for host, values in SERVERS.items())
    capture = os.path.join(os.path.dirname(__file__), *(['..'] * 4), 'roles', 'sglang_patch', 'files',
                           'eagle3_hs_capture.py')
    with open(capture, encoding='utf-8') as f:
        tree = ast.parse(f.read())
    default = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                   and any(getattr(target, 'id', None) == 'DEFAULT_LAYER_IDS' for target in node.targets))
    assert plan(servers, 'ct3', ONLINE)['online']['aux_layer_ids'] == list(default) == [1, 29, 57]
