"""sglang_server_node_must_restart: a node must restart when its config or unit file changed, its unit was not
active before the start, or it is rank 0 and /health did not answer 200 before it. sglang_server_restart: a
multi-node server restarts, every node together, when one node that reached the start must restart; the nodes
that did not reach it are named, in rank order. In-process."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.sglang_server_restart import (
    sglang_server_node_must_restart, sglang_server_restart)


def node(must_restart):
    return {'__sglang_server_at_start': True, '__sglang_server_node_must_restart': must_restart}


def test_one_node_that_must_restart_restarts_them_all():
    hostvars = {'a': node(False), 'b': node(True), 'c': node('False')}
    assert sglang_server_restart(['a', 'b', 'c'], hostvars) == {'missing': [], 'restart': True}


def test_no_node_must_restart():
    # set_fact may leave the rule's value as a string: 'False' is false
    found = sglang_server_restart(['a', 'b'], {'a': node(False), 'b': node('False')})
    assert found == {'missing': [], 'restart': False}


def test_the_nodes_that_did_not_reach_the_start_are_named_in_rank_order():
    hostvars = {'a': {}, 'b': node(False), 'c': {'other': 1}}
    assert sglang_server_restart(['c', 'b', 'a'], hostvars) == {'missing': ['c', 'a'], 'restart': False}


@pytest.mark.parametrize('nodes', ['a', [], [1], None])
def test_bad_input_is_refused(nodes):
    with pytest.raises(AnsibleFilterError, match="the server's nodes"):
        sglang_server_restart(nodes, {'a': node(True)})


def noted(active_state='active', http=200, config_changed=False, unit_changed=False):
    """A node's variables at the restart step: server_health's result before the start, and the writes of the
    configure step (registered results)."""
    return {'__sglang_server_before': {'active_state': active_state, 'http': http, 'restarts': 0},
            '__sglang_server_config_written': {'changed': config_changed, 'dest': '/etc/sglang/config.yaml'},
            '__sglang_server_unit_written': {'changed': unit_changed, 'dest': '/etc/systemd/system/sglang.service'},
            'inventory_hostname': 'ct1'}


@pytest.mark.parametrize('rank', [0, 1])
def test_an_unchanged_active_healthy_node_does_not_restart(rank):
    assert sglang_server_node_must_restart(noted(), rank) is False


@pytest.mark.parametrize('rank', [0, 1])
def test_a_changed_config_file_restarts_the_node(rank):
    assert sglang_server_node_must_restart(noted(config_changed=True), rank) is True


@pytest.mark.parametrize('rank', [0, 1])
def test_a_changed_unit_file_restarts_the_node(rank):
    assert sglang_server_node_must_restart(noted(unit_changed=True), rank) is True


@pytest.mark.parametrize('active_state', ['inactive', 'failed', 'activating'])
@pytest.mark.parametrize('rank', [0, 1])
def test_a_unit_that_was_not_active_restarts_the_node(active_state, rank):
    assert sglang_server_node_must_restart(noted(active_state=active_state), rank) is True


@pytest.mark.parametrize('http', [None, 0, '', 503, '503', 'nothing'])
def test_rank_0_restarts_when_health_did_not_answer_200(http):
    assert sglang_server_node_must_restart(noted(http=http), 0) is True


@pytest.mark.parametrize('http', [None, 503])
def test_a_node_of_rank_above_0_does_not_go_by_health(http):
    # only rank 0 serves /health; the other nodes' URL is rank 0's
    assert sglang_server_node_must_restart(noted(http=http), 1) is False


@pytest.mark.parametrize('http', [200, '200', 200.0])
def test_rank_0_reads_200_as_int_does(http):
    # the rule read http as `default(0, true) | int`
    assert sglang_server_node_must_restart(noted(http=http), 0) is False


def test_writes_that_did_not_run_changed_nothing():
    # under --tags sglang_server_run the configure step's tasks do not run: nothing is registered
    found = noted()
    del found['__sglang_server_config_written'], found['__sglang_server_unit_written']
    assert sglang_server_node_must_restart(found, 0) is False
    found['__sglang_server_unit_written'] = {'skipped': True}
    assert sglang_server_node_must_restart(found, 0) is False


@pytest.mark.parametrize('rank', ['0', None, -1, True, 0.0])
def test_a_rank_that_is_no_rank_is_refused(rank):
    with pytest.raises(AnsibleFilterError, match='the rank must be'):
        sglang_server_node_must_restart(noted(), rank)


@pytest.mark.parametrize('variables', [{}, None, 'ct1', {'__sglang_server_before': None}])
def test_variables_without_the_health_before_the_start_are_refused(variables):
    with pytest.raises(AnsibleFilterError, match='__sglang_server_before'):
        sglang_server_node_must_restart(variables, 0)


def test_what_the_node_notes_makes_the_server_restart():
    # the two filters together, as restart_server.yml and vars/main.yml use them
    hostvars = {'a': noted(), 'b': noted(unit_changed=True)}
    for rank, name in enumerate(['a', 'b']):
        hostvars[name].update(node(sglang_server_node_must_restart(hostvars[name], rank)))
    assert sglang_server_restart(['a', 'b'], hostvars) == {'missing': [], 'restart': True}
