# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pct_list's controller half: runs the module on the hypervisor and posts its answer (the containers
that run, their configuration fingerprints, or that it failed) on this play's board, so that the
converged check of each of its containers, a task of the same play on another host
(converged_state's node option), starts as soon as the answer is in and not at the next task.
extract.yml runs both in one play (strategy free): the containers' checks no longer wait for a play
of their own."""

from __future__ import annotations

from ansible import constants as C
from ansible.plugins.action import ActionBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.board import PCT_LIST, play_board
from ansible_collections.eagle3.extraction.plugins.plugin_utils.converged_inputs import node_answer


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        board = play_board(C.DEFAULT_LOCAL_TMP, PCT_LIST, self._task.get_play()._uuid)
        host = task_vars['inventory_hostname']
        try:
            answer = self._execute_module(module_name='eagle3.extraction.pct_list', module_args=self._task.args,
                                          task_vars=task_vars)
        except BaseException as exc:
            # unreachable, or the task's timeout: the waiting containers are told now, not at their own timeout
            board.post(host, node_answer({'failed': True, 'msg': '%s: %s' % (type(exc).__name__, exc)}))
            raise
        board.post(host, node_answer(answer))
        result.update(answer)
        return result
