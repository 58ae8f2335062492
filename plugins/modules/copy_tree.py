#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: copy_tree
short_description: Copy a directory from the controller to the host, in one round trip when nothing differs
version_added: 0.1.0
description:
  - Makes O(dest) hold every file of the controller's directory O(src), at the same relative path, with the same
    content (sha256) and mode O(mode); its directories are made with O(directory_mode). Files under O(dest) that
    O(src) does not have are left alone (as M(ansible.builtin.copy) of a directory does).
  - The action plugin reads O(src) on the controller (each file's size and sha256) and sends that list to the
    host, where the module compares it with O(dest) (a file's sha256 is read only when its size is the same), sets
    the modes and says which files differ. When none does, that one call is the whole task; otherwise only those
    files are sent, and a second call moves each into place (written to a temporary file next to it, its sha256
    checked, renamed).
  - M(ansible.builtin.copy) of a directory checks each file in a call of its own, which for an offline wheelhouse
    of a few dozen wheels is most of a full run of C(ml_env).
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  src:
    description:
      - The directory on the controller (a relative path is looked up as M(ansible.builtin.copy) looks up its
        O(ansible.builtin.copy#module:src)). Its contents are copied, not the directory itself.
      - Read by the action plugin; the module gets O(files).
    type: path
    required: true
  dest:
    description:
      - The directory on the host; made when it does not exist.
    type: path
    required: true
  mode:
    description:
      - The mode of every file copied, as an octal string.
    type: str
    default: '0644'
  directory_mode:
    description:
      - The mode of the directories the module makes (O(dest) and those under it), as an octal string.
    type: str
    default: '0755'
  files:
    description:
      - Set by the action plugin, not by a task - each file of O(src), by relative path, with its C(size) and
        C(sha256).
    type: dict
    default: {}
  staged:
    description:
      - Set by the action plugin, not by a task - the files sent to the host, by relative path, with the
        temporary path each was sent to; the module moves each into place.
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - eagle3.extraction.attributes.action
attributes:
  check_mode:
    support: full
    details: Says which files would be copied and changes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - V(changed) is V(true) when a file was copied or a mode or directory was set.
  - Symbolic links under O(src) are followed; O(src) must not be empty of files.
seealso:
  - module: ansible.builtin.copy
    description: A single file, or a directory with each file checked in its own call.
'''

EXAMPLES = r'''
- name: Copy the wheelhouse from the controller
  eagle3.extraction.copy_tree:
    src: /srv/wheelhouse/
    dest: /root/wheelhouse
'''

RETURN = r'''
dest:
  description: O(dest).
  returned: always
  type: str
  sample: /root/wheelhouse
files:
  description: How many files O(src) has.
  returned: always
  type: int
  sample: 22
copied:
  description: The files (relative paths) copied, or in check mode to be copied, because they were absent or differed.
  returned: always
  type: list
  elements: str
  sample: [torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl]
modes_set:
  description: The files and directories (relative paths; C(.) is O(dest)) whose mode was set, or made.
  returned: always
  type: list
  elements: str
  sample: []
'''

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import file_sha256


def _octal(module, name):
    try:
        return int(module.params[name], 8)
    except (TypeError, ValueError):
        module.fail_json(msg='%s=%r is not an octal mode' % (name, module.params[name]))
        raise  # unreachable: fail_json exits


def _inside(dest, relative):
    """The path of ``relative`` under ``dest``; refuses one that leaves it (an absolute path, ``..``)."""
    path = os.path.normpath(os.path.join(dest, relative))
    if os.path.isabs(relative) or not path.startswith(dest.rstrip('/') + '/'):
        raise ValueError('%r is not a path inside %s' % (relative, dest))
    return path


def differs(path, wanted):
    """Whether the file at ``path`` is not the one ``wanted`` ({size, sha256}) describes."""
    try:
        if os.path.getsize(path) != wanted['size']:
            return True
        return file_sha256(path) != wanted['sha256']
    except OSError:
        return True


def plan(dest, files):
    """(the files that differ, the directories to make), both relative, sorted."""
    to_copy = sorted(relative for relative, wanted in files.items() if differs(_inside(dest, relative), wanted))
    directories = set(['.'])
    for relative in files:
        parent = os.path.dirname(relative)
        while parent:
            directories.add(parent)
            parent = os.path.dirname(parent)
    missing = sorted(name for name in directories if not os.path.isdir(os.path.join(dest, name)))
    return to_copy, missing


def set_mode(path, mode, check):
    """Whether the mode of ``path`` was (or would be) set."""
    try:
        if stat.S_IMODE(os.stat(path).st_mode) == mode:
            return False
    except OSError:
        return True
    if not check:
        os.chmod(path, mode)
    return True


def place(module, dest, relative, staged, wanted, mode):
    """Moves the staged file to ``relative`` under ``dest``: copied next to it, its sha256 checked, renamed."""
    target = _inside(dest, relative)
    temporary = os.path.join(os.path.dirname(target), '.%s.copy_tree' % os.path.basename(target))
    module.preserved_copy(staged, temporary)
    if file_sha256(temporary) != wanted['sha256']:
        os.unlink(temporary)
        module.fail_json(msg='%s: the file sent has sha256 %s, not the %s of the controller\'s file'
                         % (target, file_sha256(staged), wanted['sha256']))
    os.chmod(temporary, mode)
    os.rename(temporary, target)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type='path', required=True),
            dest=dict(type='path', required=True),
            mode=dict(type='str', default='0644'),
            directory_mode=dict(type='str', default='0755'),
            files=dict(type='dict', default={}),
            staged=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    dest = params['dest'].rstrip('/') or '/'
    mode, directory_mode = _octal(module, 'mode'), _octal(module, 'directory_mode')
    files = params['files']
    if not files:
        module.fail_json(msg='src %s has no file to copy' % params['src'])
    for relative, wanted in files.items():
        if not isinstance(wanted, dict) or not isinstance(wanted.get('size'), int) or not wanted.get('sha256'):
            module.fail_json(msg='files.%s: a size and a sha256 are needed' % relative)
    try:
        to_copy, directories = plan(dest, files)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    unknown = sorted(set(params['staged']) - set(to_copy))
    if unknown:
        module.fail_json(msg='staged files that do not differ or are not in files: %s' % ', '.join(unknown))
    if params['staged'] and sorted(params['staged']) != to_copy:
        module.fail_json(msg='files still to copy that were not staged: %s'
                         % ', '.join(sorted(set(to_copy) - set(params['staged']))))
    modes_set = []
    try:
        for name in directories:
            modes_set.append(name)
            if not module.check_mode:
                os.makedirs(os.path.join(dest, name), directory_mode, exist_ok=True)
                os.chmod(os.path.join(dest, name), directory_mode)
        if params['staged'] and not module.check_mode:
            for relative in to_copy:
                place(module, dest, relative, params['staged'][relative], files[relative], mode)
        for relative in sorted(files):
            if relative in to_copy:
                continue
            if set_mode(_inside(dest, relative), mode, module.check_mode):
                modes_set.append(relative)
    except OSError as exc:
        module.fail_json(msg='%s: %s' % (dest, exc), copied=[], modes_set=modes_set)
    # the first call (nothing staged) reports what is to copy; the action plugin sends it and calls again
    module.exit_json(changed=bool(to_copy or modes_set), dest=dest, files=len(files), copied=to_copy,
                     modes_set=sorted(set(modes_set)))


if __name__ == '__main__':
    main()
