"""The action plugin copy_tree, in-process: the controller's files listed with their sha256 and sent
in one module call; only what the module names is transferred, then a second call places it; a
converged directory is one call and no transfer."""

from __future__ import annotations

import hashlib
from unittest import mock

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.eagle3.extraction.plugins.action.copy_tree import ActionModule


def action(tmp_path, answers, check_mode=False):
    task = mock.MagicMock(args={'src': str(tmp_path / 'src'), 'dest': '/root/wheelhouse'}, async_val=0,
                          check_mode=check_mode, diff=False, action='eagle3.extraction.copy_tree')
    connection = mock.MagicMock()
    connection._shell.tmpdir = '/tmp/ansible-tmp'
    connection._shell.join_path = lambda *parts: '/'.join(parts)
    plugin = ActionModule(task, connection, mock.MagicMock(check_mode=check_mode), DataLoader(),
                          Templar(loader=DataLoader(), variables={}), None)
    sent, transferred = [], []
    plugin._execute_module = lambda module_name, module_args, task_vars: (
        sent.append(dict(module_args)) or answers[len(sent) - 1])
    plugin._transfer_file = lambda local, remote: transferred.append((local, remote))
    plugin._fixup_perms2 = lambda paths: None
    plugin._remove_tmp_path = lambda path: None
    plugin._find_needle = lambda dirname, needle: needle
    return plugin, sent, transferred


def wheelhouse(tmp_path):
    (tmp_path / 'src').mkdir()
    (tmp_path / 'src' / 'a.whl').write_bytes(b'wheel a')
    (tmp_path / 'src' / 'b.whl').write_bytes(b'wheel b')


def test_a_converged_directory_is_one_call_and_no_transfer(tmp_path):
    wheelhouse(tmp_path)
    plugin, sent, transferred = action(tmp_path, [{'changed': False, 'copied': [], 'modes_set': []}])
    result = plugin.run(task_vars={})
    assert len(sent) == 1 and transferred == [] and result['changed'] is False
    assert sent[0]['files']['a.whl'] == {'size': 7, 'sha256': hashlib.sha256(b'wheel a').hexdigest()}


def test_only_the_files_that_differ_are_sent_then_placed(tmp_path):
    wheelhouse(tmp_path)
    plugin, sent, transferred = action(tmp_path, [{'changed': True, 'copied': ['b.whl'], 'modes_set': []},
                                                  {'changed': False, 'copied': [], 'modes_set': []}])
    result = plugin.run(task_vars={})
    assert transferred == [(str(tmp_path / 'src' / 'b.whl'), '/tmp/ansible-tmp/copy_tree.0')]
    assert sent[1]['staged'] == {'b.whl': '/tmp/ansible-tmp/copy_tree.0'}
    assert result['changed'] is True and result['copied'] == ['b.whl']


def test_check_mode_sends_nothing(tmp_path):
    wheelhouse(tmp_path)
    plugin, sent, transferred = action(tmp_path, [{'changed': True, 'copied': ['a.whl', 'b.whl']}], check_mode=True)
    result = plugin.run(task_vars={})
    assert len(sent) == 1 and transferred == [] and result['copied'] == ['a.whl', 'b.whl']


def test_a_missing_source_fails_naming_it(tmp_path):
    plugin, sent, dummy = action(tmp_path, [])
    result = plugin.run(task_vars={})
    assert result['failed'] and 'not a directory' in result['msg'] and sent == []
