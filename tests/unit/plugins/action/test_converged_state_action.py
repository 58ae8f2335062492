"""The action plugin converged_state, in-process: with mode=check it computes the host's inputs on
the controller (templated role variables, the collection's files) and hands them to the module;
with compare=false it does not contact the host at all; with node, it waits for that hypervisor's
pct_list answer in the same play and contacts only a container it lists as running."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.eagle3.extraction.plugins.action import converged_state
from ansible_collections.eagle3.extraction.plugins.action.converged_state import ActionModule
from ansible_collections.eagle3.extraction.plugins.plugin_utils.board import PCT_LIST, play_board

PREFIXES = ['sglang_server', 'ml_env']


def action(args, variables):
    task = mock.MagicMock(args=args, async_val=0, check_mode=False, diff=False, action='eagle3.extraction.converged_state')
    play_context = mock.MagicMock(check_mode=False)
    plugin = ActionModule(task, mock.MagicMock(), play_context, DataLoader(),
                          Templar(loader=DataLoader(), variables=variables), None)
    sent = []

    def execute_module(module_name, module_args, task_vars):
        sent.append((module_name, dict(module_args)))
        return {'changed': False, 'converged': True, 'differs': [], 'inputs': module_args.get('inputs')}
    plugin._execute_module = execute_module
    return plugin, sent


def check(variables, **args):
    plugin, sent = action(dict({'path': '/var/lib/x.json', 'inputs_from': PREFIXES}, **args), variables)
    return plugin.run(task_vars=variables), sent


def test_the_inputs_are_computed_on_the_controller_and_sent_to_the_module():
    variables = {'sglang_server_port': 8000, 'ml_env_packages': ['sglang'], 'ansible_host': '10.0.0.1'}
    result, sent = check(variables)
    assert [name for name, dummy in sent] == ['eagle3.extraction.converged_state']
    assert len(sent[0][1]['inputs']) == 64 and result['inputs'] == sent[0][1]['inputs']
    # a variable of another role or of the connection is not an input; a role variable is
    assert check(dict(variables, ansible_host='10.0.0.2'))[0]['inputs'] == result['inputs']
    assert check(dict(variables, sglang_server_port=30000))[0]['inputs'] != result['inputs']


def test_values_count_as_templated():
    """A variable written as a template (as the inventory holds it) counts by its value, as the roles read it."""
    port = trust_as_template('{{ base }}')
    plain, dummy = check({'sglang_server_port': 8000, 'base': 1})
    templated, dummy = check({'sglang_server_port': port, 'base': 8000})
    moved, dummy = check({'sglang_server_port': port, 'base': 30000})
    assert templated['inputs'] == plain['inputs']
    assert moved['inputs'] != templated['inputs']


def test_compare_false_contacts_no_host():
    result, sent = check({'sglang_server_port': 8000}, compare=False)
    assert sent == []
    assert result['converged'] is False and result['differs'] == ['not compared'] and len(result['inputs']) == 64


@pytest.mark.parametrize('args', [{'mode': 'record', 'inputs': 'given'}, {'mode': 'digest'}])
def test_record_and_digest_go_to_the_module_as_given(args):
    plugin, sent = action(args, {'sglang_server_port': 8000})
    plugin.run(task_vars={'sglang_server_port': 8000})
    assert sent == [('eagle3.extraction.converged_state', args)]


# with node: the container is compared only when its hypervisor, in the same play, lists it as running

@pytest.fixture
def local_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(converged_state.C, 'DEFAULT_LOCAL_TMP', str(tmp_path))
    return str(tmp_path)


def post(local_tmp, answer, node='pve1'):
    play_board(local_tmp, PCT_LIST, 'play-1').post(node, answer)


def check_on_node(variables, **args):
    variables = dict({'sglang_server_port': 8000, 'ansible_play_hosts_all': ['pve1', 'ct1']}, **variables)
    plugin, sent = action(dict({'path': '/var/lib/x.json', 'inputs_from': PREFIXES, 'node': 'pve1', 'vmid': 101},
                               **args), variables)
    plugin._task.get_play.return_value._uuid = 'play-1'
    return plugin.run(task_vars=variables), sent


def test_a_running_container_is_compared_with_the_fingerprint_its_hypervisor_read(local_tmp):
    post(local_tmp, {'answered': True, 'running': [101], 'config_states': {'101': 'f' * 64}})
    result, sent = check_on_node({}, expect={'dataset': 'd' * 64})
    assert [name for name, dummy in sent] == ['eagle3.extraction.converged_state']
    assert sent[0][1]['expect'] == {'dataset': 'd' * 64, 'node': 'f' * 64}
    assert result['converged'] is True


@pytest.mark.parametrize('answer, differs', [
    ({'answered': True, 'running': [102], 'config_states': {'101': 'f' * 64}}, 'not running'),
    ({'answered': False, 'msg': 'pct list failed'}, 'node did not answer'),
])
def test_a_container_that_does_not_run_or_whose_node_failed_is_not_contacted(local_tmp, answer, differs):
    post(local_tmp, answer)
    result, sent = check_on_node({})
    assert sent == []
    assert result['converged'] is False and result['differs'] == [differs] and len(result['inputs']) == 64


def test_a_node_that_never_answers_ends_the_wait_at_node_timeout(local_tmp):
    result, sent = check_on_node({}, node_timeout=0)
    assert sent == [] and result['differs'] == ['node did not answer']


def test_a_node_outside_the_play_is_not_waited_for(local_tmp):
    # --limit left the hypervisor out: nothing would ever post
    result, sent = check_on_node({'ansible_play_hosts_all': ['ct1']})
    assert sent == [] and result['differs'] == ['node not in this play']


def test_extract_force_waits_for_no_node(local_tmp):
    result, sent = check_on_node({}, compare=False)
    assert sent == [] and result['differs'] == ['not compared']


def test_node_without_vmid_is_refused(local_tmp):
    result, sent = check_on_node({}, vmid=None)
    assert sent == [] and result['failed'] is True and 'needs vmid' in result['msg']
