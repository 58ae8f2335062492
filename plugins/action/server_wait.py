# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""server_wait: wait for a server's /health on every node of the server at once (one task), failing
the whole server soon when any node's unit dies, with that node's name and cause.

Why an action plugin: a node's unit is visible from that node only, and the nodes are other
containers. Each node's worker on the controller runs server_health on its node a step at a time and
posts the look on a board in the run's local temporary directory, which every worker of the run
shares (ansible-playbook's forks); between steps each node reads the others' looks. The linear
strategy starts every node of the server on this task together (they are in one batch: a server
restarts as a whole).

With start=true the wait begins with the start itself (the unit's failed state cleared first by
unit_reset_failed, which decides whether there is one, then ansible.builtin.systemd_service enables
and starts it), so that a role's run step is one task.
"""

from __future__ import annotations

import os

from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.eagle3.extraction.plugins.plugin_utils.action_args import validated
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_wait import (
    Board, failure_message, progress_line, verdict)

display = Display()

ARGUMENT_SPEC = {
    'unit': {'type': 'str', 'required': True},
    'url': {'type': 'str', 'required': True},
    'log_file': {'type': 'path', 'default': ''},
    'log_offset': {'type': 'int', 'default': 0},
    'restarts_before': {'type': 'int', 'default': 0},
    'timeout': {'type': 'int', 'required': True},
    'step': {'type': 'int', 'default': 60},
    'server': {'type': 'str', 'default': ''},
    'nodes': {'type': 'list', 'elements': 'str', 'default': []},
    'start': {'type': 'bool', 'default': False},
}
HEALTH = 'eagle3.extraction.server_health'
RESET_FAILED = 'eagle3.extraction.unit_reset_failed'


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args, error = validated('server_wait', ARGUMENT_SPEC, self._task.args)
        if error:
            return dict(result, failed=True, msg=error)
        node = task_vars['inventory_hostname']
        nodes = args['nodes'] or [node]
        if node not in nodes:
            return dict(result, failed=True, msg='server_wait: nodes=%s does not hold this host (%s)' % (nodes, node))
        if not 1 <= args['step'] <= 3600 or not 0 <= args['timeout'] <= 86400:
            return dict(result, failed=True, msg='server_wait: step must be 1 to 3600 s and timeout 0 to 86400 s')
        look_args = dict((name, args[name]) for name in ('unit', 'url', 'log_file', 'log_offset', 'restarts_before'))
        started = {'changed': False}
        if args['start']:
            started = self._start(args['unit'], task_vars)
            if started.get('failed') or started.get('unreachable'):
                return dict(result, **started)
        if self._task.check_mode:
            # nothing was started: one look, and no verdict
            mine = self._look(look_args, 0, task_vars)
            return dict(result, **dict(mine, changed=started['changed'], waited=0, died=[], nodes={}))
        # one board per wait and server: the task's id is the same on every node of this run's task
        board = Board(os.path.join(C.DEFAULT_LOCAL_TMP, 'server_wait', self._task._uuid, args['server'] or node))
        waited, state, died = 0, 'starting', []
        while True:
            seconds = min(args['step'], args['timeout'] - waited)
            mine = dict(self._look(look_args, seconds, task_vars), node=node, log_file=args['log_file'],
                        unit_name=args['unit'])
            # a node that cannot be looked at ends its own wait; its peers go on to their timeout
            if mine.get('failed') or mine.get('unreachable'):
                return dict(result, **mine)
            board.post(node, mine)
            waited += seconds
            state, died = verdict(mine, board.read([n for n in nodes if n != node]), nodes)
            if state != 'starting' or waited >= args['timeout']:
                break
            if node == nodes[0]:
                display.display('%s: %s' % (node, progress_line(mine, waited, args['timeout'])))
        looks = board.read(nodes)
        looks[node] = mine
        result.update(mine, changed=started['changed'], state=state, waited=waited, died=died, nodes=looks)
        result.pop('failed', None)
        if state != 'ready':
            result.update(failed=True, msg=failure_message(state, died, looks, args['server'] or node, nodes,
                                                           args['timeout']))
        return result

    def _start(self, unit, task_vars):
        """Clear the unit's failed state (systemd refuses to start a unit that hit its start limit; the module
        unit_reset_failed decides whether it has one), then enable and start it: {'changed': ...}, or the
        failed step's result."""
        cleared = self._execute_module(module_name=RESET_FAILED, module_args={'unit': unit}, task_vars=task_vars)
        if cleared.get('failed') or cleared.get('unreachable'):
            return cleared
        started = self._execute_module(module_name='ansible.builtin.systemd_service',
                                       module_args={'name': unit, 'state': 'started', 'enabled': True},
                                       task_vars=task_vars)
        if started.get('failed') or started.get('unreachable'):
            return started
        return {'changed': bool(cleared.get('changed')) or bool(started.get('changed'))}

    def _look(self, look_args, seconds, task_vars):
        """server_health on this node: its unit and the server's /health, for up to ``seconds``."""
        look = self._execute_module(module_name=HEALTH, module_args=dict(look_args, timeout=seconds),
                                    task_vars=task_vars)
        look.pop('invocation', None)
        return look
