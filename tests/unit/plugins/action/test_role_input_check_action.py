"""role_input_check for sglang_server checks the address its server will listen on, from the host's plan
(the lookup host_plan, as the role's tasks read it): a value the rules let through but no address can be
made of fails naming the variable; a server that listens beyond its container without an API key is
warned of, once, in the check's result (the role had a task for each)."""

from __future__ import annotations

import importlib.util
import os

from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.eagle3.extraction.plugins.action import role_input_check

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location(
    'agree', os.path.join(HERE, '..', '..', 'test_inventory_and_role_agree.py'))
AGREE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(AGREE)


def check(**values):
    task_vars = dict(AGREE.DEFAULTS['sglang_server'], **AGREE.BASE)
    task_vars.update(proxmox_container_vmid=500, inventory_hostname='ct1', ansible_host='10.0.0.1',
                     hostvars={'pve1': {}}, groups={'extraction_servers': ['ct1']})
    task_vars.update(values)
    return AGREE.run_action(role_input_check, {'role': 'sglang_server'}, task_vars)


def test_the_default_address_passes_without_a_warning():
    result = check()
    assert not result.get('failed'), result.get('errors')
    assert 'warnings' not in result


@pytest.mark.parametrize('values', [{'sglang_server_host': '0.0.0.0'}, {'sglang_server_host': '::'}])
def test_a_server_beyond_its_container_without_a_key_is_warned_of(values):
    result = check(**values)
    assert not result.get('failed'), result.get('errors')
    assert len(result['warnings']) == 1 and 'sglang_server_api_key is empty' in result['warnings'][0]


def test_an_api_key_silences_the_warning_and_is_not_shown():
    result = check(sglang_server_host='0.0.0.0', sglang_server_api_key='s3cret-key')
    assert not result.get('failed') and 'warnings' not in result
    assert 's3cret-key' not in repr(result)


def test_an_address_the_rules_let_through_but_no_plan_can_use_fails_naming_the_variable():
    # a bind host the variable's pattern lets through and no address is (the address's rule, which the plan applies)
    result = check(sglang_server_host='node_1')
    assert result.get('failed') is True, result
    assert result['errors'] == ["ct1: sglang_server_host='node_1' is not an address to listen on; give an IPv4 or "
                                "IPv6 address (without brackets), a host name, 0.0.0.0 or ::"], result['errors']


@pytest.mark.parametrize('strategy, refused', [
    ('free', True), ('ansible.builtin.free', True), ('host_pinned', True), ('linear', False),
    ('ansible.builtin.linear', False)])
@pytest.mark.parametrize('role', ['extraction_job', 'online_training'])
def test_a_role_that_builds_its_wheel_once_refuses_a_free_strategy(role, strategy, refused):
    """Its wheel build is run_once on the controller: under strategy: free each host ran it at its own time and took
    another host's build dir for its own."""
    task = mock.MagicMock()
    task.args = {'role': role}
    task.action = 'eagle3.extraction.role_input_check'
    task.get_play.return_value.strategy = strategy
    task_vars = dict(AGREE.DEFAULTS[role], **AGREE.BASE)
    task_vars.update(proxmox_container_vmid=500, inventory_hostname='ct1', hostvars={'pve1': {}})
    templar = Templar(loader=DataLoader(), variables=task_vars)
    plugin = role_input_check.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=DataLoader(),
                                           templar=templar, shared_loader_obj=None)
    with mock.patch.object(role_input_check.ControllerCheck.__mro__[1], 'run', return_value={}):
        result = plugin.run(task_vars=task_vars)
    errors = [error for error in result.get('errors', []) if 'strategy' in error]
    assert bool(errors) is refused, result.get('errors')
    if refused:
        assert errors[0].startswith('%s cannot run under strategy: %s' % (role, strategy))
        assert 'strategy: linear' in errors[0]
