# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An action plugin's own arguments checked against its argument spec before it does anything, the one way the
collection's action plugins do it (controller_check.ControllerCheck, server_wait, pct_list)."""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator


def validated(name, spec, args):
    """(the validated arguments, None), or (None, ``<name>: <every error>``) for the task's failure."""
    checked = ArgumentSpecValidator(spec).validate(args)
    if checked.error_messages:
        return None, '%s: %s' % (name, '; '.join(checked.error_messages))
    return checked.validated_parameters, None
