#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: server_host_facts
short_description: What an SGLang server needs from its host - the model's files and the dump directory's filesystem
version_added: 0.1.0
description:
  - Reads, in one step, what the sglang_server role checks before it starts anything.
  - The model directory O(model_path) - whether C(config.json) and C(model.safetensors.index.json) are there, the
    shards the index's C(weight_map) lists and those of them that are missing.
  - The dump directory O(dump_dir) - whether it exists, and the type and free bytes of the filesystem it is on (of
    its nearest existing parent when it does not exist yet).
  - With O(require), fails when the model directory lacks C(config.json), its index or a shard the index lists, or
    the dump directory is not on a tmpfs with at least O(min_free_gib) GiB free, each message naming the role
    C(sglang_server)'s variable and the value found (the role's preflight).
  - Changes nothing.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  model_path:
    description:
      - The model directory, an absolute path.
    type: path
    required: true
  dump_dir:
    description:
      - The directory the hidden-state capture writes to, an absolute path.
    type: path
    required: true
  require:
    description:
      - Fail when the model is incomplete or the dump directory is not on a tmpfs with O(min_free_gib) free.
    type: bool
    default: false
  min_free_gib:
    description:
      - With O(require), the GiB the dump directory's tmpfs must have free (C(sglang_server_shm_min_free_gib)).
    type: float
    default: 0
extends_documentation_fragment:
  - eagle3.extraction.attributes
'''

EXAMPLES = r'''
- name: Read the model's files and the dump dir's filesystem
  eagle3.extraction.server_host_facts:
    model_path: /srv/models/Kimi-K2
    dump_dir: /dev/shm/eagle3-dumps
  register: host

- name: Fail on a missing shard
  ansible.builtin.assert:
    that: host.model.shards_missing | length == 0
'''

RETURN = r'''
model:
  description: The model directory.
  returned: always
  type: dict
  contains:
    missing_files:
      description: Which of C(config.json) and C(model.safetensors.index.json) are not there.
      type: list
      elements: str
    index_error:
      description: Why the index cannot be read, or null.
      type: str
    shards_listed:
      description: The shard files the index's C(weight_map) names, sorted.
      type: list
      elements: str
    shards_missing:
      description: Those of RV(model.shards_listed) not in the directory.
      type: list
      elements: str
  sample: {missing_files: [], index_error: null, shards_listed: [model-00001-of-00002.safetensors,
           model-00002-of-00002.safetensors], shards_missing: [model-00002-of-00002.safetensors]}
dump_dir:
  description: The dump directory.
  returned: always
  type: dict
  contains:
    exists:
      description: Whether it is a directory now.
      type: bool
    checked:
      description: The path whose filesystem was read (the directory or its nearest existing parent).
      type: str
    fstype:
      description: That filesystem's type (C(tmpfs) for C(/dev/shm)).
      type: str
    avail_bytes:
      description: Bytes free there for an unprivileged user.
      type: int
  sample: {exists: true, checked: /dev/shm/eagle3-dumps, fstype: tmpfs, avail_bytes: 68719476736}
'''

import json
import os

from ansible.module_utils.basic import AnsibleModule

MODEL_FILES = ('config.json', 'model.safetensors.index.json')
MOUNTINFO = '/proc/self/mountinfo'
GIB = 1073741824


def model_facts(model_path):
    missing = [name for name in MODEL_FILES if not os.path.isfile(os.path.join(model_path, name))]
    facts = dict(missing_files=missing, index_error=None, shards_listed=[], shards_missing=[])
    index = os.path.join(model_path, 'model.safetensors.index.json')
    if 'model.safetensors.index.json' in missing:
        return facts
    try:
        with open(index, encoding='utf-8') as handle:
            weight_map = json.load(handle).get('weight_map') or {}
        if not isinstance(weight_map, dict):
            raise ValueError('weight_map is not a mapping')
        listed = sorted(set(str(name) for name in weight_map.values()))
    except (OSError, ValueError, AttributeError) as exc:
        facts['index_error'] = '%s: %s' % (index, exc)
        return facts
    try:
        present = set(name for name in os.listdir(model_path) if name.endswith('.safetensors'))
    except OSError:
        present = set()
    facts['shards_listed'] = listed
    facts['shards_missing'] = [name for name in listed if name not in present]
    return facts


def unescape_mount_path(text):
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code in ('\\040', '\\011', '\\012', '\\134'):
        text = text.replace(code, chr(int(code[1:], 8)))
    return text


def filesystem_type(path, mountinfo=MOUNTINFO):
    """The type of the filesystem mounted nearest above path (the last such mount wins, as in the kernel)."""
    best, best_type = '', ''
    with open(mountinfo) as handle:
        for line in handle:
            fields = line.split()
            if ' - ' not in line or len(fields) < 5:
                continue
            mount_point = unescape_mount_path(fields[4])
            fstype = line.split(' - ', 1)[1].split()[0]
            inside = path == mount_point or path.startswith(mount_point.rstrip('/') + '/')
            if inside and len(mount_point) >= len(best):
                best, best_type = mount_point, fstype
    return best_type


def dump_dir_facts(dump_dir):
    checked = os.path.realpath(dump_dir)
    while not os.path.exists(checked) and checked != '/':
        checked = os.path.dirname(checked)
    stat = os.statvfs(checked)
    return dict(exists=os.path.isdir(dump_dir), checked=checked, fstype=filesystem_type(checked),
                avail_bytes=stat.f_bavail * stat.f_frsize)


def model_problem(model_path, model):
    """Why the model directory cannot be served, in the words of sglang_server's preflight, or None."""
    where = 'sglang_server: sglang_server_model_path=%s' % model_path
    if model['missing_files']:
        return '%s lacks %s' % (where, ' and '.join(model['missing_files']))
    if model['index_error']:
        return '%s: %s' % (where, model['index_error'])
    if not model['shards_listed'] or model['shards_missing']:
        return '%s: model.safetensors.index.json lists %d shards; missing: %s' % (
            where, len(model['shards_listed']),
            ', '.join(model['shards_missing']) if model['shards_missing'] else 'none (but the weight_map is empty)')
    return None


def dump_problem(dump_dir, dump, min_free_gib):
    """Why the dump directory cannot take the dumps, in the words of sglang_server's preflight, or None."""
    if dump['fstype'] == 'tmpfs' and dump['avail_bytes'] >= int(min_free_gib * GIB):
        return None
    free = dump['avail_bytes'] / GIB
    return ('sglang_server: sglang_server_dump_dir=%s is on %s with %.1f GiB free; it must be on a tmpfs with at least '
            'sglang_server_shm_min_free_gib=%s GiB free' % (dump_dir, dump['fstype'], free, min_free_gib))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type='path', required=True),
            dump_dir=dict(type='path', required=True),
            require=dict(type='bool', default=False),
            min_free_gib=dict(type='float', default=0.0),
        ),
        supports_check_mode=True,
    )
    for name in ('model_path', 'dump_dir'):
        value = module.params[name]
        if not os.path.isabs(value) or any(ord(char) < 32 for char in value):
            module.fail_json(msg='%s=%r is not an absolute path' % (name, value))
    try:
        dump = dump_dir_facts(module.params['dump_dir'])
    except OSError as exc:
        module.fail_json(msg='cannot read the filesystem of dump_dir=%s: %s' % (module.params['dump_dir'], exc))
    model = model_facts(module.params['model_path'])
    if module.params['require']:
        for problem in (model_problem(module.params['model_path'], model),
                        dump_problem(module.params['dump_dir'], dump, module.params['min_free_gib'])):
            if problem:
                module.fail_json(msg=problem, model=model, dump_dir=dump)
    module.exit_json(changed=False, model=model, dump_dir=dump)


if __name__ == '__main__':
    main()
