# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of the action plugins that only read variables on the controller (inventory_check,
role_input_check): no connection, no file sent, their own arguments validated first."""

from __future__ import annotations

import abc

from ansible.plugins.action import ActionBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.action_args import validated


class ControllerCheck(ActionBase):
    """Subclasses set ARGUMENT_SPEC and implement check(args, task_vars, result)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    # they only read, so a --check run checks as a real one does (tests/integration/test_role_input_check.py)
    _supports_check_mode = True
    ARGUMENT_SPEC = {}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args, error = validated(self._task.action.rsplit('.', 1)[-1], self.ARGUMENT_SPEC, self._task.args)
        if error:
            return dict(result, failed=True, msg=error)
        return self.check(args, task_vars, result)

    @abc.abstractmethod
    def check(self, args, task_vars, result):
        """The check itself, on the validated ``args``: returns ``result``, updated."""
