# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""copy_tree's controller half: each file of src (size, sha256) read here and sent to the module in
one call, which says which differ on the host; only those are sent, and a second call moves them
into place. A converged directory costs one call, however many files it has."""

from __future__ import annotations

import os

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import file_sha256

MODULE = 'eagle3.extraction.copy_tree'


def manifest(directory):
    """{relative path: {size, sha256}} of every file under ``directory`` (symbolic links followed)."""
    files = {}
    for root, dirs, names in os.walk(directory, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if not os.path.isfile(path):
                continue
            files[os.path.relpath(path, directory)] = {'size': os.path.getsize(path), 'sha256': file_sha256(path)}
    return files


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        for name in ('files', 'staged'):
            if name in args:
                result.update(failed=True, msg='%s is set by the action plugin, not by a task' % name)
                return result
        if not args.get('src') or not args.get('dest'):
            result.update(failed=True, msg='src and dest are required')
            return result
        try:
            source = self._find_needle('files', args['src'])
        except AnsibleError as exc:
            result.update(failed=True, msg=to_text(exc))
            return result
        if not os.path.isdir(source):
            result.update(failed=True, msg='src %s is not a directory on the controller' % source)
            return result
        args['files'] = manifest(source)
        first = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
        if first.get('failed') or self._task.check_mode or not first.get('copied'):
            result.update(first)
            return result
        staged = {}
        try:
            remote = self._connection._shell.tmpdir or self._make_tmp_path()
            for number, relative in enumerate(first['copied']):
                path = self._connection._shell.join_path(remote, 'copy_tree.%d' % number)
                self._transfer_file(os.path.join(source, relative), path)
                staged[relative] = path
            self._fixup_perms2(list(staged.values()) + [remote])
            second = self._execute_module(module_name=MODULE, module_args=dict(args, staged=staged),
                                          task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(second)
        result['changed'] = bool(first.get('changed') or second.get('changed'))
        result['copied'] = first['copied']
        result['modes_set'] = sorted(set(first.get('modes_set', [])) | set(second.get('modes_set', [])))
        return result
