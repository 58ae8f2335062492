"""The action plugin converged_state, in-process: with mode=check it computes the host's inputs on
the controller (templated role variables, the collection's files) and hands them to the module;
with compare=false it does not contact the host at all, nor with listing (its hypervisor's pct_list
answer) when that answer does not list the container as running."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.eagle3.extraction.plugins.action.converged_state import ActionModule

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


# with listing (its hypervisor's pct_list answer): the container is compared only when that answer lists it
# as running, with the configuration fingerprint the hypervisor read

ANSWER = {'changed': False, 'rc': 0, 'stderr': '', 'running': [101],
          'containers': {'101': {'status': 'running', 'lock': '', 'name': 'ct1'},
                         '102': {'status': 'stopped', 'lock': '', 'name': 'ct2'}},
          'config_states': {'101': 'f' * 64, '102': 'e' * 64}}


def check_listed(listing, **args):
    return check({'sglang_server_port': 8000}, **dict({'listing': listing, 'vmid': 101}, **args))


def test_a_running_container_is_compared_with_the_fingerprint_its_hypervisor_read():
    result, sent = check_listed(ANSWER, expect={'dataset': 'd' * 64})
    assert [name for name, dummy in sent] == ['eagle3.extraction.converged_state']
    assert sent[0][1]['expect'] == {'dataset': 'd' * 64, 'node': 'f' * 64}
    # read on the controller: the host is not sent the hypervisor's answer
    assert 'listing' not in sent[0][1]
    assert result['converged'] is True


@pytest.mark.parametrize('listing, differs', [
    (dict(ANSWER, running=[]), 'not running'),
    ({'failed': True, 'msg': '/usr/sbin/pct list failed with exit code 2: boom', 'rc': 2, 'stderr': 'boom'},
     'node did not answer'),
    ({'unreachable': True, 'msg': 'ssh: connect to host 10.0.0.2 port 22: No route to host'}, 'node did not answer'),
    (None, 'node did not answer'),   # the hypervisor is not in this run (--limit)
])
def test_a_container_that_does_not_run_or_whose_node_did_not_answer_is_not_contacted(listing, differs):
    result, sent = check_listed(listing)
    assert sent == []
    assert result['converged'] is False and result['differs'] == [differs] and len(result['inputs']) == 64


def test_vmid_as_the_inventory_may_write_it():
    result, sent = check_listed(ANSWER, vmid='101')
    assert sent[0][1]['expect'] == {'node': 'f' * 64}


def test_extract_force_compares_nothing_whatever_the_listing():
    result, sent = check_listed(ANSWER, compare=False)
    assert sent == [] and result['differs'] == ['not compared']


def test_listing_without_vmid_is_refused():
    result, sent = check_listed(ANSWER, vmid=None)
    assert sent == [] and result['failed'] is True and 'needs vmid' in result['msg']


def test_the_record_is_not_sent_the_listing():
    plugin, sent = action({'mode': 'record', 'inputs': 'given', 'listing': ANSWER, 'vmid': 101}, {})
    plugin.run(task_vars={})
    assert sent == [('eagle3.extraction.converged_state', {'mode': 'record', 'inputs': 'given', 'vmid': 101})]
