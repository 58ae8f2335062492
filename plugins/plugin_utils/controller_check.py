# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of the action plugins that only read variables on the controller (inventory_check,
role_input_check): no connection, no file sent, their own arguments validated first."""

from __future__ import annotations

import abc

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase


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
        validated = ArgumentSpecValidator(self.ARGUMENT_SPEC).validate(self._task.args)
        if validated.error_messages:
            name = self._task.action.rsplit('.', 1)[-1]
            return dict(result, failed=True, msg='%s: %s' % (name, '; '.join(validated.error_messages)))
        return self.check(validated.validated_parameters, task_vars, result)

    @abc.abstractmethod
    def check(self, args, task_vars, result):
        """The check itself, on the validated ``args``: returns ``result``, updated."""
