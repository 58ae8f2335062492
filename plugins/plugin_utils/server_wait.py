# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health wait of a server over one or more nodes (the action plugin server_wait), without I/O.

Every node of the server runs the wait at once (one task of the play): each looks at its own unit
and at rank 0's /health through the module server_health, a step at a time, and posts what it saw on
a board on the controller that every node of the server reads between steps. The server is
ready when rank 0's /health answers 200; it has died when any node's unit died (the first in rank
order is named); otherwise it is starting until the timeout is spent.
"""

from __future__ import annotations

import json
import os
import re


def verdict(mine, board, nodes):
    """('ready' | 'died' | 'starting', the nodes that died, in rank order).

    ``mine`` is this node's last look (server_health's result), ``board`` {node: look} the other
    nodes' last looks as posted (a node that has not posted yet is missing), ``nodes`` the
    server's nodes in rank order."""
    looks = dict(board)
    looks[mine['node']] = mine
    died = [node for node in nodes if looks.get(node, {}).get('state') == 'died']
    if died:
        return 'died', died
    # rank 0's /health answers for the whole server: every node polls it
    if mine.get('state') == 'ready':
        return 'ready', []
    return 'starting', []


def failure_message(state, died, looks, server, nodes, timeout):
    """Why the server did not come up, naming the node that died and its cause, with its log lines."""
    if len(nodes) > 1:
        head = 'sglang_server: server %s (%s) did not come up: ' % (server, ', '.join(nodes))
        if state == 'died':
            return head + '\n'.join(
                'node %s (rank %d) died while starting (%s); cause: %s; last log lines (%s on %s):\n%s'
                % (node, nodes.index(node), looks[node].get('unit', '?'), looks[node].get('cause') or 'not recognised',
                   looks[node].get('log_file', '?'), node, '\n'.join(looks[node].get('tail', [])))
                for node in died)
        rank0 = looks.get(nodes[0], {})
        return head + ('rank 0 (%s) did not answer 200 on /health within sglang_server_ready_timeout=%ss; last log '
                       'lines there:\n%s' % (nodes[0], timeout, '\n'.join(rank0.get('tail', []))))
    mine = looks[nodes[0]]
    what = ('did not answer 200 on /health within sglang_server_ready_timeout=%ss' % timeout if state == 'starting'
            else 'died while starting (%s)' % mine.get('unit', '?'))
    return 'sglang_server: %s %s; cause: %s; last log lines (%s):\n%s' % (
        mine.get('unit_name', '?'), what, mine.get('cause') or 'not recognised', mine.get('log_file', '?'),
        '\n'.join(mine.get('tail', [])))


def progress_line(mine, waited, timeout):
    return '%s not ready after %ds of %ss (/health: %s); newest log line: %s' % (
        mine.get('unit_name', '?'), waited, timeout, mine.get('http') or 'no answer', mine.get('newest', ''))


class Board(object):
    """The nodes' last looks, one JSON file per node under ``path`` (one directory per wait), each
    replaced whole so that a reader never sees half of one."""

    def __init__(self, path):
        self.path = path

    def post(self, node, look):
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        target = os.path.join(self.path, re.sub(r'[^A-Za-z0-9_.-]', '_', node) + '.json')
        with open(target + '.tmp', 'w') as out:
            json.dump(look, out)
        os.replace(target + '.tmp', target)

    def read(self, nodes):
        looks = {}
        for node in nodes:
            try:
                with open(os.path.join(self.path, re.sub(r'[^A-Za-z0-9_.-]', '_', node) + '.json')) as posted:
                    looks[node] = json.load(posted)
            except (OSError, ValueError):
                continue
        return looks
