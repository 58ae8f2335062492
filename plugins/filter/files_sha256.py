# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""files_sha256: one sha256 over every file under some directories on the controller, so
that a play can tell whether its own code changed without a module round trip."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: files_sha256
short_description: One sha256 over the names and contents of every file under directories on the controller
version_added: 0.1.0
description:
  - Walks each directory (symlinks to directories are not followed), skipping C(__pycache__) directories and C(*.pyc)
    files, and hashes every regular file's path relative to its directory and its content, in sorted order.
  - The same files with the same contents give the same value wherever the directories are; a changed, added,
    removed or renamed file gives another. A directory that does not exist counts as empty.
  - Runs on the controller, like every filter.
options:
  _input:
    description: The directories, absolute paths.
    type: list
    elements: path
    required: true
'''

EXAMPLES = r'''
- name: Fingerprint this collection's playbooks, roles and plugins
  ansible.builtin.set_fact:
    code_sha256: "{{ [playbook_dir, playbook_dir ~ '/../roles', playbook_dir ~ '/../plugins'] | eagle3.extraction.files_sha256 }}"
'''

RETURN = r'''
_value:
  description: The sha256, 64 hex digits.
  type: str
'''

import hashlib
import os

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_bytes, to_text


def files_sha256(directories):
    if isinstance(directories, (str, bytes)) or not isinstance(directories, (list, tuple)):
        raise AnsibleFilterError('files_sha256: give a list of directories; got %r' % (directories,))
    total = hashlib.sha256()
    for number, directory in enumerate(directories):
        directory = to_text(directory)
        if not os.path.isabs(directory):
            raise AnsibleFilterError('files_sha256: %r is not an absolute path' % directory)
        total.update(b'dir %d\0' % number)
        for root, dirs, files in os.walk(directory):
            dirs[:] = sorted(name for name in dirs if name != '__pycache__')
            for name in sorted(files):
                path = os.path.join(root, name)
                if name.endswith('.pyc') or not os.path.isfile(path):
                    continue
                content = hashlib.sha256()
                with open(path, 'rb') as handle:
                    for block in iter(lambda: handle.read(1 << 20), b''):
                        content.update(block)
                total.update(to_bytes(os.path.relpath(path, directory)) + b'\0' + content.digest())
    return total.hexdigest()


class FilterModule(object):
    def filters(self):
        return {'files_sha256': files_sha256}
