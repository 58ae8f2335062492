# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""converged_state's controller half: with mode=check, the fingerprint of the host's inputs (its
variables of the roles inputs_from names, and this collection's files, which only the controller
has) is computed here and handed to the module, which compares it on the host with the stamp. With
compare=false (extract_force) the host is not contacted.

With listing (its hypervisor's pct_list answer, vmid its ID there), a container that answer does not
list as running, or whose hypervisor did not answer, is not contacted either (a stopped container can
hang an SSH session that a connection kept open from an earlier run still holds); one that runs is
compared, its configuration fingerprint as pct_list read it expected in the stamp."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.eagle3.extraction.plugins.module_utils.converged_differs import NOT_COMPARED
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_vmid
from ansible_collections.eagle3.extraction.plugins.plugin_utils.converged_inputs import (
    collection_code_sha256, input_names, inputs_sha256, listed)

MODULE = 'eagle3.extraction.converged_state'
NOT_GIVEN = object()


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

    @staticmethod
    def not_compared(args, listing):
        """Why the host is not compared, or None; the node's fingerprint then goes into args['expect']."""
        if not boolean(args.get('compare', True), strict=False):
            return NOT_COMPARED
        if listing is NOT_GIVEN:
            return None
        reason, state = listed(listing, inventory_vmid(args['vmid']))
        if reason is None:
            args['expect'] = dict(args.get('expect') or {}, node=state)
        return reason

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        # the node's answer is read here; the host needs none of it
        listing = args.pop('listing', NOT_GIVEN)
        if args.get('mode', 'check') == 'check':
            if listing is not NOT_GIVEN and inventory_vmid(args.get('vmid')) is None:
                return dict(result, failed=True, msg="converged_state: listing needs vmid, the container's ID on its node")
            if not args.get('inputs'):
                args['inputs'] = self.inputs(args.get('inputs_from') or [], task_vars)
            why = self.not_compared(args, listing)
            if why:
                result.update(changed=False, converged=False, differs=[why], stamp=None, inputs=args['inputs'])
                return result
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        return result
