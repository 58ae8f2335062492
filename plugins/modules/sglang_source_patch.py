#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_source_patch
short_description: Insert blocks of code after anchor lines of a Python source file, or take them out, by checksum
version_added: 0.1.0
description:
  - Patches one Python source file of an installed package (sglang's C(deepseek_v2.py) for the hidden-state capture)
    from a spec that names the file's pristine and patched sha256 and the blocks to insert.
  - The file's sha256 tells its state. The target state already - no change. The other known state - the file is
    rewritten. Anything else (an edited file, another version) - the module fails naming the file and both
    checksums, and changes nothing.
  - With O(state=present) each insertion's text, indented by its O(insertions[].indent), goes right after its
    O(insertions[].after) line, which must occur exactly once in the file; O(state=absent) takes the blocks out
    again, in reverse order.
  - The new text must have the sha256 of the target state and must compile (with the interpreter that runs the
    module, so run it with the package's own interpreter) before anything is written. It is written to a temporary
    file next to the target, flushed to disk, then renamed over it, keeping the file's mode.
  - With C(--diff) the whole unified diff is returned, whatever the file's size (ansible's own file modules stop
    at C(max_diff_size), 100 KiB).
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  path:
    description:
      - The source file to patch, an absolute path.
    type: path
    required: true
  state:
    description:
      - V(present) inserts the blocks into the pristine file; V(absent) restores the pristine file.
    type: str
    choices: [present, absent]
    default: present
  pristine_sha256:
    description:
      - sha256 of the file as its package ships it.
    type: str
    required: true
  patched_sha256:
    description:
      - sha256 of the file with every insertion made.
    type: str
    required: true
  insertions:
    description:
      - The blocks to insert, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      after:
        description:
          - The whole line (its newline included) after which the block goes. It must occur exactly once in the
            pristine file.
        type: str
        required: true
      indent:
        description:
          - Spaces put before each non-empty line of O(insertions[].text).
        type: int
        default: 0
      text:
        description:
          - The block, one or more whole lines, without the indentation.
        type: str
        required: true
  backup:
    description:
      - Keep a timestamped copy of the file next to it before rewriting it.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
notes:
  - In check mode the new text is computed, checked against its sha256 and compiled, and the diff is returned;
    nothing is written.
  - A running program keeps the code it imported; restart it to use the new file.
seealso:
  - module: ansible.builtin.blockinfile
    description: Marker-delimited blocks; this module instead pins the whole file by checksum.
'''

EXAMPLES = r'''
- name: Hook a capture into deepseek_v2.py, run with the venv's interpreter
  eagle3.extraction.sglang_source_patch:
    path: /root/ml-env/lib/python3.12/site-packages/sglang/srt/models/deepseek_v2.py
    pristine_sha256: f61f93019bf1e7680f45a1fe227244433e1b22021cb955e53d25b9cf900473f9
    patched_sha256: b3bacc745191c6df9fd88c398f28b6d68c69e8296978ea854f25df2f17b68d70
    insertions:
      - after: "        self.capture_aux_hidden_states = False\n"
        indent: 8
        text: |
          from sglang.srt import eagle3_hs_capture
          self._eagle3_hs_capture = eagle3_hs_capture.install(self)
    backup: true
  vars:
    ansible_python_interpreter: /root/ml-env/bin/python

- name: Refuse an edited file before anything else is installed (reads only)
  eagle3.extraction.sglang_source_patch:
    path: "{{ target }}"
    pristine_sha256: "{{ spec.pristine_sha256 }}"
    patched_sha256: "{{ spec.patched_sha256 }}"
    insertions: "{{ spec.insertions }}"
  check_mode: true
  register: found
'''

RETURN = r'''
found:
  description: What the file was before this run.
  returned: always
  type: str
  sample: pristine
sha256_before:
  description: sha256 of the file before this run.
  returned: always
  type: str
sha256_after:
  description: sha256 of the file after this run (in check mode, what it would be).
  returned: always
  type: str
backup_file:
  description: The copy kept with O(backup=true).
  returned: when a backup was made
  type: str
  sample: /root/ml-env/lib/python3.12/site-packages/sglang/srt/models/deepseek_v2.py.4242.2026-01-01@00:00:00~
'''

import difflib
import hashlib
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

SHA256 = re.compile(r'[0-9a-f]{64}')


class PatchError(Exception):
    """The file cannot be patched; nothing was changed."""


def sha256(text):
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def indented(insertion):
    """The block as inserted: the indentation before each non-empty line."""
    pad = ' ' * insertion['indent']
    return re.sub(r'(?m)^(?=.)', pad, insertion['text'])


def insert(text, insertions):
    """The pristine text with every block inserted after its anchor line."""
    for ins in insertions:
        count = text.count(ins['after'])
        if count != 1:
            raise PatchError('the anchor line %r occurs %d times in the pristine file, not once' % (ins['after'], count))
        text = text.replace(ins['after'], ins['after'] + indented(ins), 1)
    return text


def remove(text, insertions):
    """The patched text with every block taken out again."""
    for ins in reversed(insertions):
        block = ins['after'] + indented(ins)
        count = text.count(block)
        if count != 1:
            raise PatchError('the inserted block after %r occurs %d times in the patched file, not once' % (ins['after'], count))
        text = text.replace(block, ins['after'], 1)
    return text


def classify(digest, pristine_sha256, patched_sha256):
    if digest == pristine_sha256:
        return 'pristine'
    if digest == patched_sha256:
        return 'patched'
    return 'edited'


def plan(path, text, state, pristine_sha256, patched_sha256, insertions):
    """(found, new text or None when nothing changes). Raises PatchError on a file this spec does not know."""
    digest = sha256(text)
    found = classify(digest, pristine_sha256, patched_sha256)
    if found == 'edited':
        raise PatchError(
            '%s matches neither the package\'s own file (sha256 %s) nor the patched one (%s): it was edited '
            '(sha256 %s). Nothing was changed.' % (path, pristine_sha256, patched_sha256, digest))
    want = 'patched' if state == 'present' else 'pristine'
    if found == want:
        return found, None
    new = insert(text, insertions) if state == 'present' else remove(text, insertions)
    want_sha256 = patched_sha256 if state == 'present' else pristine_sha256
    if sha256(new) != want_sha256:
        raise PatchError(
            'the computed %s %s has sha256 %s, not %s. Nothing was changed.' % (want, path, sha256(new), want_sha256))
    return found, new


def unified_diff(path, old, new, label):
    return ''.join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, '%s (%s)' % (path, label)))


def write_atomically(path, text):
    """Temporary file in the same directory, fsync, rename over path (keeping its mode), fsync the directory."""
    directory = os.path.dirname(path)
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, 'w', encoding='utf-8', newline='') as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            pristine_sha256=dict(type='str', required=True),
            patched_sha256=dict(type='str', required=True),
            insertions=dict(type='list', elements='dict', required=True, options=dict(
                after=dict(type='str', required=True),
                indent=dict(type='int', default=0),
                text=dict(type='str', required=True),
            )),
            backup=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path = params['path']
    for name in ('pristine_sha256', 'patched_sha256'):
        if not SHA256.fullmatch(params[name]):
            module.fail_json(msg='%s=%r is not a sha256 (64 lowercase hex digits)' % (name, params[name]))
    for number, ins in enumerate(params['insertions']):
        if not 0 <= ins['indent'] <= 80:
            module.fail_json(msg='insertions[%d].indent=%d is not from 0 to 80' % (number, ins['indent']))
        if not ins['after'].endswith('\n') or '\n' in ins['after'][:-1]:
            module.fail_json(msg='insertions[%d].after=%r is not one whole line ending in a newline' % (number, ins['after']))
        if not ins['text'].endswith('\n'):
            module.fail_json(msg='insertions[%d].text must end in a newline (whole lines)' % number)
    if not os.path.isabs(path):
        module.fail_json(msg='path=%r is not an absolute path' % path)

    try:
        with open(path, encoding='utf-8', newline='') as handle:
            text = handle.read()
    except OSError as exc:
        module.fail_json(msg='cannot read %s: %s. Nothing was changed.' % (path, to_native(exc.strerror or exc)))
    except UnicodeDecodeError as exc:
        module.fail_json(msg='%s is not UTF-8 text (%s). Nothing was changed.' % (path, exc))

    try:
        found, new = plan(path, text, params['state'], params['pristine_sha256'], params['patched_sha256'],
                          params['insertions'])
    except PatchError as exc:
        module.fail_json(msg=str(exc), sha256_before=sha256(text))

    result = dict(changed=new is not None, found=found, sha256_before=sha256(text),
                  sha256_after=sha256(new) if new is not None else sha256(text))
    if new is None:
        module.exit_json(**result)

    try:
        compile(new, path, 'exec', dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        module.fail_json(msg='the new %s does not compile: %s. Nothing was changed.' % (path, exc), **result)

    if module._diff:
        label = 'patched' if params['state'] == 'present' else 'pristine'
        result['diff'] = dict(prepared=unified_diff(path, text, new, label))

    if not module.check_mode:
        if params['backup']:
            result['backup_file'] = module.backup_local(path)
        try:
            write_atomically(path, new)
        except OSError as exc:
            module.fail_json(msg='cannot write %s: %s' % (path, to_native(exc)), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
