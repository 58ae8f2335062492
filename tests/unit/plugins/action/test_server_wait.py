"""server_wait: one task on every node of a server waits for rank 0's /health; a node whose unit dies
fails the whole server within a step, naming that node, its cause and its log lines; rank 0 is ready
only when /health answers 200; a one-node server keeps its own message. The nodes' workers are played
here in one process: the other nodes' looks are posted on the board as their workers would."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from ansible_collections.eagle3.extraction.plugins.action import server_wait
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_wait import Board

DUO = {'server': 'duo', 'nodes': ['ct1', 'ct3'], 'step': 10}


def look(state='starting', http=503, unit='activating/start, 0 automatic restarts', cause='', tail=()):
    return {'state': state, 'http': http, 'unit': unit, 'cause': cause, 'tail': list(tail),
            'newest': tail[-1] if tail else '', 'active_state': 'active', 'restarts': 0, 'log_size': 0,
            'changed': False}


@pytest.fixture
def board_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(server_wait.C, 'DEFAULT_LOCAL_TMP', str(tmp_path))
    return tmp_path


def action(args, looks, host='ct1', check_mode=False, between=None, others=None, plugins=None):
    """A server_wait on ``host`` whose server_health answers ``looks`` one per step; ``between(n)`` runs
    after the n-th look (another node posting); ``others``: {module: result} of the start's modules, whose
    calls are appended to ``plugins`` (a list) when given."""
    others = others or {}
    task = mock.MagicMock()
    task.args = dict({'unit': 'sglang-extraction.service', 'url': 'http://10.0.0.1:30000/health',
                      'log_file': '/var/log/sglang/x.log', 'timeout': 60}, **args)
    task.check_mode = check_mode
    task.async_val = 0
    task._uuid = 'task-1'
    plugin = server_wait.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                      shared_loader_obj=None)
    calls = []
    plugin.others = []

    def execute(module_name, module_args, task_vars):
        if module_name != server_wait.HEALTH:
            plugin.others.append((module_name, module_args))
            return dict(others.get(module_name, {'changed': False}))
        calls.append(module_args['timeout'])
        answer = looks[min(len(calls), len(looks)) - 1]
        if between:
            between(len(calls))
        return dict(answer)

    plugin._execute_module = execute
    with mock.patch.object(server_wait.ActionBase, 'run', return_value={}):
        result = plugin.run(task_vars={'inventory_hostname': host})
    if plugins is not None:
        plugins.extend(plugin.others)
    return result, calls


def test_a_node_that_dies_fails_rank_0_within_a_step_naming_it(board_dir):
    def ct3_dies(step):
        if step == 2:
            Board(os.path.join(str(board_dir), 'server_wait', 'task-1', 'duo')).post('ct3', dict(
                look('died', None, 'failed/failed, 0 automatic restarts', 'NCCL error (check ...)',
                     ['loading', 'RuntimeError: NCCL error: unhandled system error']),
                node='ct3', log_file='/var/log/sglang/x.log'))

    result, calls = action(dict(DUO, timeout=3600), [look()], between=ct3_dies)

    # rank 0 stopped after the step in which ct3 died, not at the timeout
    assert calls == [10, 10] and result['failed'] and result['state'] == 'died' and result['died'] == ['ct3']
    assert result['msg'].startswith('sglang_server: server duo (ct1, ct3) did not come up: node ct3 (rank 1) died '
                                    'while starting (failed/failed, 0 automatic restarts); cause: NCCL error')
    assert 'RuntimeError: NCCL error: unhandled system error' in result['msg']


def test_the_node_that_dies_fails_at_once_naming_itself(board_dir):
    result, calls = action(DUO, [look('died', None, 'failed/failed', '', ['boom'])], host='ct3')
    assert calls == [10] and result['state'] == 'died'
    assert 'node ct3 (rank 1) died while starting (failed/failed); cause: not recognised' in result['msg']
    assert result['msg'].endswith('(/var/log/sglang/x.log on ct3):\nboom')


def test_ready_only_when_rank_0_answers_200_after_every_node_joined(board_dir):
    result, calls = action(DUO, [look(), look(), look('ready', 200)], host='ct3')
    assert calls == [10, 10, 10] and result['state'] == 'ready' and not result.get('failed')
    assert not result['changed'] and result['waited'] == 30


def test_rank_0_that_never_answers_fails_after_the_timeout_with_its_log(board_dir):
    result, calls = action(dict(DUO, timeout=25), [look(tail=['still loading'])])
    assert calls == [10, 10, 5] and result['state'] == 'starting'
    assert result['msg'] == ('sglang_server: server duo (ct1, ct3) did not come up: rank 0 (ct1) did not answer 200 '
                             'on /health within sglang_server_ready_timeout=25s; last log lines there:\nstill loading')


def test_a_stale_board_of_another_wait_is_not_read(board_dir):
    Board(os.path.join(str(board_dir), 'server_wait', 'an-earlier-task', 'duo')).post('ct3', look('died'))
    result, calls = action(DUO, [look(), look('ready', 200)])
    assert result['state'] == 'ready' and calls == [10, 10]


def test_one_node_server_says_what_its_unit_did(board_dir):
    result, calls = action({'timeout': 120}, [look('died', None, 'failed/failed', 'a Python module is missing',
                                                   ['ModuleNotFoundError'])], host='ct2')
    assert calls == [60] and result['msg'] == (
        'sglang_server: sglang-extraction.service died while starting (failed/failed); cause: a Python module is '
        'missing; last log lines (/var/log/sglang/x.log):\nModuleNotFoundError')
    result, calls = action({'timeout': 90}, [look()], host='ct2')
    assert calls == [60, 30] and 'did not answer 200 on /health within sglang_server_ready_timeout=90s' in result['msg']


def test_check_mode_looks_once_and_does_not_fail(board_dir):
    result, calls = action(DUO, [look()], check_mode=True)
    assert calls == [0] and not result.get('failed') and result['state'] == 'starting'


@pytest.mark.parametrize('args, says', [
    ({'nodes': ['ct3']}, 'does not hold this host'),
    ({'step': 0}, 'step must be'),
    ({'timeout': -1}, 'timeout 0 to 86400'),
    ({'timeout': 'soon'}, 'timeout'),
    ({'step': 'often'}, 'step'),
])
def test_bad_arguments_are_refused_before_any_look(board_dir, args, says):
    result, calls = action(args, [look()])
    assert result['failed'] and says in result['msg'] and calls == []


def test_a_failed_look_is_returned_as_it_is(board_dir):
    result, calls = action(DUO, [{'failed': True, 'msg': 'url=... is not an http:// or https:// URL'}])
    assert result['failed'] and result['msg'].startswith('url=') and calls == [10]


def test_an_unreachable_node_ends_its_wait_at_once(board_dir):
    result, calls = action(DUO, [{'unreachable': True, 'msg': 'Failed to connect to the host via ssh'}])
    assert result['unreachable'] and 'ssh' in result['msg'] and calls == [10]


def test_start_clears_a_failed_unit_then_enables_and_starts_it_before_the_wait(board_dir):
    # whether the unit has a failed state to clear is unit_reset_failed's to say (it reads the unit first)
    started = []
    result, calls = action({'start': True}, [look('ready', 200)],
                           others={server_wait.RESET_FAILED: {'changed': True, 'reset': True},
                                   'ansible.builtin.systemd_service': {'changed': True}}, plugins=started)
    assert started == [(server_wait.RESET_FAILED, {'unit': 'sglang-extraction.service'}),
                       ('ansible.builtin.systemd_service',
                        {'name': 'sglang-extraction.service', 'state': 'started', 'enabled': True})]
    assert result['state'] == 'ready' and result['changed'] is True and calls == [60]


def test_start_of_a_running_unit_changes_nothing(board_dir):
    started = []
    result, dummy = action({'start': True}, [look('ready', 200)], plugins=started)
    assert [name for name, dummy in started] == [server_wait.RESET_FAILED, 'ansible.builtin.systemd_service']
    assert result['changed'] is False and not result.get('failed')


def test_a_reset_that_fails_is_returned_without_a_start(board_dir):
    started = []
    result, calls = action({'start': True}, [look('ready', 200)], plugins=started, others={
        server_wait.RESET_FAILED: {'failed': True, 'msg': 'systemctl reset-failed -- sglang-extraction.service failed'}})
    assert result['failed'] and 'reset-failed' in result['msg'] and calls == []
    assert [name for name, dummy in started] == [server_wait.RESET_FAILED]


def test_a_start_that_fails_is_returned_without_a_wait(board_dir):
    result, calls = action({'start': True}, [look('ready', 200)], others={
        'ansible.builtin.systemd_service': {'failed': True, 'msg': 'Unit sglang-extraction.service not found.'}})
    assert result['failed'] and 'not found' in result['msg'] and calls == []


def test_check_mode_reports_the_start_and_does_not_clear(board_dir):
    # the action runs in check mode: so do its modules, which change nothing (unit_reset_failed's own tests)
    started = []
    result, calls = action({'start': True}, [look()], check_mode=True,
                           others={server_wait.RESET_FAILED: {'changed': True, 'reset': True},
                                   'ansible.builtin.systemd_service': {'changed': True}}, plugins=started)
    assert [name for name, dummy in started] == [server_wait.RESET_FAILED, 'ansible.builtin.systemd_service']
    assert result['changed'] is True and calls == [0] and not result.get('failed')
