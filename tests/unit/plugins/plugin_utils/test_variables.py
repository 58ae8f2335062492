"""The variable records (plugin_utils/role_variables/<role>.py, gathered by plugin_utils/variables.py): each
variable once, named after its role, described, its default passing its own rule; and what the plan reads is
what the records declare for it: a read of an undeclared variable fails at once, naming it."""

from __future__ import annotations

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils import host_plan, role_inputs, variables
from ansible_collections.eagle3.extraction.plugins.plugin_utils.host_plan import UndeclaredRead, plan


def plain_defaults():
    """Every variable's default that is no template: what an inventory that sets everything holds."""
    return dict((name, variable.default) for name, variable in variables.BY_NAME.items()
                if variable.has_default and not (isinstance(variable.default, str) and '{{' in variable.default))


@pytest.mark.parametrize('role', variables.ROLES)
def test_each_record_is_one_described_variable_of_its_role(role):
    names = [variable.name for variable in variables.records(role)]
    assert len(names) == len(set(names))
    assert all(name.startswith(role + '_') for name in names)
    assert all(variable.description and variable.type for variable in variables.records(role))
    assert all(variables.role_of(name) == role for name in names)


@pytest.mark.parametrize('role', variables.ROLES)
def test_each_plain_default_passes_its_own_rule(role):
    # 0 stands for "not set" in a container ID every container sets (cross_host_errors names a missing one)
    defaults = dict((name, value) for name, value in plain_defaults().items()
                    if name in variables.options(role) and name != 'proxmox_container_vmid')
    assert role_inputs.role_value_errors(role_inputs.load_specs()[role], defaults) == []


def test_what_is_computed_from_the_records():
    assert variables.FLAG_VARIABLES == {'model-path': 'sglang_server_model_path', 'host': 'sglang_server_host',
                                        'port': 'sglang_server_port', 'tp-size': 'sglang_server_tp_size'}
    assert set(variables.PEER_READ) <= set(variables.PLAN_READ)
    assert set(variables.FLAG_VARIABLES.values()) <= set(variables.PLAN_READ)
    assert [name for name in variables.BY_NAME if name.startswith('sglang_patch_')
            and name not in variables.SAME_ON_EVERY_NODE] == []
    assert variables.SECRETS == {'sglang_server_api_key', 'extraction_job_api_key'}
    assert role_inputs.REQUIRED == {
        'sglang_server_model_path': 'the absolute path of the model dir',
        'online_training_job': 'the name of the online extraction job it trains from',
        'online_training_mooncake_master': 'the inventory name of a host of the mooncake_masters group',
        'online_training_target_model_path': 'the absolute path of the target model dir',
        'online_training_draft_config': "the absolute path of the drafter's config.json",
        'online_training_vocab_mapping_path': 'the absolute path of the d2t/t2d vocab mapping',
        'online_training_dataset': 'the absolute path of the conversations (JSONL)'}
    # an extraction server is not asked for a trainer's inputs
    assert role_inputs.SERVER_REQUIRED == ['sglang_server_model_path']


def test_the_plan_reads_only_declared_variables():
    """An inventory that sets every variable, a two-node server beside a one-node one: every plan is made
    (no UndeclaredRead) and holds what was declared."""
    every = dict(plain_defaults(), sglang_server_model_path='/srv/m', sglang_server_tp_size=8)
    hosts = {
        'ct1': dict(every, ansible_host='10.0.0.1'),
        'ct2': dict(every, ansible_host='10.0.0.2', sglang_server_name='duo', sglang_server_node_rank=0),
        'ct3': dict(every, ansible_host='10.0.0.3', sglang_server_name='duo', sglang_server_node_rank=1),
    }
    plans = dict((host, plan(hosts, host)) for host in hosts)
    assert plans['ct3']['server']['flags']['dist-init-addr'] == '10.0.0.2:5000'
    assert plans['ct1']['job']['shard_count'] == 2


def test_a_variable_the_plan_reads_without_its_record_saying_so_fails_at_once(monkeypatch):
    """The missed entry of the issue: the plan read it, the inventory check's plan held the inventory's value and
    the roles' plan the default. Now the read itself fails, in every test that makes a plan."""
    monkeypatch.setattr(host_plan, 'READ', tuple(name for name in host_plan.READ if name != 'sglang_server_dump_dir'))
    with pytest.raises(UndeclaredRead) as failed:
        plan({'ct1': {'sglang_server_dump_dir': '/dev/shm/x'}}, 'ct1')
    assert str(failed.value) == (
        "the host plan reads sglang_server_dump_dir of ct1, which its record (plugins/plugin_utils/role_variables/) "
        "does not declare for the plan: plan=True for its own host, peer=True for another's")


def test_another_hosts_variable_is_read_only_when_declared_peer(monkeypatch):
    monkeypatch.setattr(host_plan, 'PEER_READ', tuple(name for name in host_plan.PEER_READ
                                                      if name != 'sglang_server_node_rank'))
    hosts = {'ct1': {'sglang_server_name': 'duo'}, 'ct2': {'sglang_server_name': 'duo', 'sglang_server_node_rank': 1}}
    with pytest.raises(UndeclaredRead, match='reads sglang_server_node_rank of ct2'):
        plan(hosts, 'ct1')


def test_the_inventory_checks_values_and_a_tasks_make_one_plan():
    """The inventory check hands the plan every variable of every host, the lookup this host's as a task sees
    them: the plan is made of the same declared values either way."""
    every = dict(plain_defaults(), sglang_server_model_path='/srv/m', sglang_server_tp_size=8,
                 sglang_server_port=18000, extraction_job_name='other', unrelated='not read')
    task_vars = dict(every, inventory_hostname='ct1', hostvars={}, groups={})
    assert plan({'ct1': every}, 'ct1') == host_plan.task_plan(task_vars, lambda value: value)
