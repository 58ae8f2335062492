"""pct_list's action plugin: the module's answer is the task's result and is posted on the play's board
(the running containers and their configuration fingerprints) for the containers' converged checks of
the same play; a failed pct, or a hypervisor that cannot be reached, is posted as no answer, so that
they stop waiting at once."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.errors import AnsibleConnectionFailure
from ansible_collections.eagle3.extraction.plugins.action import pct_list
from ansible_collections.eagle3.extraction.plugins.plugin_utils.board import PCT_LIST, play_board

ANSWER = {'changed': False, 'rc': 0, 'stderr': '', 'running': [101],
          'containers': {'101': {'status': 'running', 'lock': '', 'name': 'ct1'},
                         '102': {'status': 'stopped', 'lock': '', 'name': 'ct2'}},
          'config_states': {'101': 'a' * 64, '102': 'b' * 64}}


@pytest.fixture
def local_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(pct_list.C, 'DEFAULT_LOCAL_TMP', str(tmp_path))
    return str(tmp_path)


def run(execute):
    task = mock.MagicMock(args={}, async_val=0, check_mode=False)
    task.get_play.return_value._uuid = 'play-1'
    plugin = pct_list.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                   shared_loader_obj=None)
    plugin._execute_module = execute
    with mock.patch.object(pct_list.ActionBase, 'run', return_value={}):
        return plugin.run(task_vars={'inventory_hostname': 'pve1'})


def posted(local_tmp):
    return play_board(local_tmp, PCT_LIST, 'play-1').read(['pve1']).get('pve1')


def test_the_answer_is_the_result_and_is_posted(local_tmp):
    assert run(lambda **kwargs: dict(ANSWER)) == ANSWER
    assert posted(local_tmp) == {'answered': True, 'running': [101], 'config_states': ANSWER['config_states']}


def test_a_failed_pct_is_posted_as_no_answer(local_tmp):
    result = run(lambda **kwargs: {'failed': True, 'msg': '/usr/sbin/pct list failed with exit code 2: boom'})
    assert result['failed'] is True
    assert posted(local_tmp) == {'answered': False, 'msg': '/usr/sbin/pct list failed with exit code 2: boom'}


def test_an_unreachable_hypervisor_is_posted_before_the_task_fails(local_tmp):
    def unreachable(**kwargs):
        raise AnsibleConnectionFailure('ssh: connect to host 10.0.0.2 port 22: No route to host')
    with pytest.raises(AnsibleConnectionFailure):
        run(unreachable)
    answer = posted(local_tmp)
    assert answer['answered'] is False and 'No route to host' in answer['msg']
