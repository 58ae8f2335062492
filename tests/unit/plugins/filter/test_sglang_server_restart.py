"""sglang_server_restart: a multi-node server restarts, every node together, when one node that reached the
start must restart; the nodes that did not reach it are named, in rank order. In-process."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.sglang_server_restart import sglang_server_restart


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
