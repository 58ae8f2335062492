# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""converged_state's controller half: with mode=check, the fingerprint of the host's inputs (its
variables of the roles inputs_from names, and this collection's files, which only the controller
has) is computed here and handed to the module, which compares it on the host with the stamp. With
compare=false (extract_force, a container that is not running) the host is not contacted."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.eagle3.extraction.plugins.plugin_utils.converged_inputs import (
    collection_code_sha256, input_names, inputs_sha256)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def inputs(self, prefixes, task_vars):
        values = {}
        for name in input_names(task_vars, prefixes):
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError as exc:
                # a value that cannot be read now is kept as written: it still changes with the inventory
                values[name] = 'unreadable (%s): %r' % (type(exc).__name__, task_vars[name])
        return inputs_sha256(values, collection_code_sha256())

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        if args.get('mode', 'check') == 'check':
            if not args.get('inputs'):
                args['inputs'] = self.inputs(args.get('inputs_from') or [], task_vars or {})
            if not boolean(args.get('compare', True), strict=False):
                result.update(changed=False, converged=False, differs=['not compared'], stamp=None,
                              inputs=args['inputs'])
                return result
        result.update(self._execute_module(module_name='eagle3.extraction.converged_state', module_args=args,
                                           task_vars=task_vars))
        return result
