#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: shm_reclaim
short_description: Remove stale NCCL and PyTorch shared-memory segments that no process holds any more
version_added: 0.1.0
description:
  - After a crash, SGLang and NCCL leave shared-memory segments behind in C(/dev/shm)
    (C(nccl-*) from NCCL's shared-memory transport, C(psm_*) from PyTorch multiprocessing). They use RAM (tmpfs)
    until removed, and a restarted server may trip over them.
  - Removes the regular files directly in O(path) whose name matches one of O(patterns), unless a live process still
    holds them.
  - A file is held when a process has it open (a C(/proc/<pid>/fd/*) link to it) or mapped (a line of
    C(/proc/<pid>/maps)). Files are told apart by device and inode number, so a process that sees the directory
    under another path (another mount namespace, a bind mount) still counts as a holder.
  - Only the top level of O(path) is looked at. Directories, symlinks (never followed) and other special files are
    left alone, whatever their name.
  - Nothing to remove is success with C(changed=false), and so is a O(path) that does not exist.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  path:
    description:
      - The directory to clean up, an absolute path on a C(tmpfs) file system (any other file system is refused,
        the files there are not shared-memory segments).
    type: str
    default: /dev/shm
  patterns:
    description:
      - Shell globs (C(*), C(?), C([...])) matched, case-sensitively, against each file's name (not its path).
      - A file is a candidate when any of them matches.
      - Each pattern must start with at least three plain characters (no C(*), C(?), C([)) and hold no C(/), so that
        it names a kind of segment; V(*), V(*.bin) or V(a*) are refused.
    type: list
    elements: str
    default: ['nccl-*', 'psm_*']
  min_age:
    description:
      - Leave alone files modified less than this many seconds ago, even if no process holds them yet. A segment
        being set up may be created a moment before the process that created it maps it.
      - V(0) takes every file that is not held. At most 2592000 (30 days).
    type: raw
    default: 0
extends_documentation_fragment:
  - eagle3.extraction.attributes
notes:
  - Reads C(/proc) directly, so it needs Linux and, to see every process's open files and mappings, root. Processes
    whose C(/proc) entries could not be read are listed in RV(unreadable_pids); files are still removed, since a
    holder among them cannot be seen.
  - Only processes visible in C(/proc) count. Inside an LXC container, processes of the hypervisor or of other
    containers are invisible, so run it where the processes that use O(path) run (a container normally has its own
    C(/dev/shm)).
  - A process may open a file between the scan and its removal; removing it then only drops the name, the process
    keeps its memory. Use O(min_age) to leave freshly created segments alone.
  - In check mode nothing is removed; RV(removed) and RV(bytes_freed) say what would be.
seealso:
  - module: eagle3.extraction.process_reclaim
    description: Kill the leftover server processes first, so that their segments are no longer held.
  - module: eagle3.extraction.port_reclaim
'''

EXAMPLES = r'''
- name: Remove stale NCCL and PyTorch segments before starting SGLang
  eagle3.extraction.shm_reclaim:

- name: Only NCCL segments at least a minute old
  eagle3.extraction.shm_reclaim:
    patterns:
      - nccl-*
    min_age: 60

- name: Report what would be removed, remove nothing
  eagle3.extraction.shm_reclaim:
  check_mode: true
  register: shm

- name: Show who still holds segments
  ansible.builtin.debug:
    msg: "{{ item.path }} held by {{ item.holders | map(attribute='pid') | list }}"
  loop: "{{ shm.kept }}"
  when: item.holders | length > 0
'''

RETURN = r'''
removed:
  description:
    - Files removed, or in check mode the files that would be removed, sorted by path.
    - Each has its C(path), its C(size) in bytes, and C(holders), always empty (a removed file had no holder).
  returned: always
  type: list
  elements: dict
  sample: [{path: /dev/shm/nccl-Ab12Cd, size: 9637888, holders: []}]
kept:
  description:
    - Matching files left in place, because a process holds them or they are younger than O(min_age).
    - Sorted by path.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Path of the file.
      type: str
    size:
      description: Size in bytes.
      type: int
    holders:
      description: Processes that have the file open or mapped, sorted by PID; empty when only O(min_age) kept it.
      type: list
      elements: dict
      contains:
        pid:
          description: PID.
          type: int
        name:
          description: Process name (C(comm), at most 15 characters); empty if the process has exited since.
          type: str
    reason:
      description: V(held) when a process holds the file, else V(younger than min_age).
      type: str
  sample: [{path: /dev/shm/nccl-Xy34Zw, size: 9637888, holders: [{pid: 4242, name: sglang::schedul}], reason: held}]
bytes_freed:
  description: Total size of the files in RV(removed); in check mode, what would be freed.
  returned: always
  type: int
  sample: 9637888
unreadable_pids:
  description:
    - Processes whose open files or mappings could not be read (no permission). They may hold a file that was
      removed anyway. Processes that exited during the scan are not listed.
  returned: always
  type: list
  elements: int
  sample: []
msg:
  description: Why nothing was looked at, when O(path) does not exist.
  returned: when O(path) does not exist
  type: str
  sample: /dev/shm does not exist, nothing to reclaim
'''

import errno
import fnmatch
import os
import re
import stat
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import (
    number_error, number_option, option_value_errors, show)

# errors that mean the process exited while we looked: it holds nothing any more
GONE = (errno.ENOENT, errno.ESRCH)

# a pattern must start with this many plain characters (no *, ?, [) so that it names a kind of segment
MIN_LITERAL_PREFIX = 3
# the oldest min_age a user may ask for, in seconds (30 days)
MAX_MIN_AGE = 30 * 86400
_GLOB_CHARS = '*?[\\'


def literal_prefix(pattern):
    """The plain characters a glob starts with, before its first *, ?, [ or backslash."""
    for index, char in enumerate(pattern):
        if char in _GLOB_CHARS:
            return pattern[:index]
    return pattern


def _unescape_mount_field(field):
    # /proc/self/mounts writes space, tab, newline and backslash as octal escapes (\040 ...)
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path, mounts='/proc/self/mounts'):
    """The type of the file system path lives on (its longest mount point), or None if unknown."""
    real = os.path.realpath(path)
    best, best_type = '', None
    try:
        with open(mounts) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = _unescape_mount_field(fields[1])
        inside = real == mount_point or real.startswith(mount_point.rstrip('/') + '/')
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, fields[2]
    return best_type


def validate(params, mounts='/proc/self/mounts'):
    """Messages for bad option values, each naming the option and its value; nothing is read but the path's type.

    The numbers of ``params`` (as the task gave them) are converted in place."""
    errors = option_value_errors(params, {'min_age': 'float'})
    error = number_error('min_age', params['min_age'], 0, MAX_MIN_AGE, 'seconds')
    if error:
        errors.append(error)
    for index, pattern in enumerate(params['patterns']):
        where = 'patterns[%d]' % index
        if '/' in pattern:
            errors.append('%s: %s holds a /; a pattern matches a file name in path, not a path' % (where, show(pattern)))
        elif len(literal_prefix(pattern)) < MIN_LITERAL_PREFIX:
            errors.append('%s: %s does not start with at least %d plain characters, so it could match every '
                          'segment; name the kind of segment (e.g. nccl-*)' % (where, show(pattern), MIN_LITERAL_PREFIX))
    path = params['path']
    if not os.path.isabs(path):
        errors.append('path: %s is not an absolute path' % show(path))
    elif os.path.exists(path):
        if not os.path.isdir(path):
            errors.append('path: %s is not a directory' % show(path))
        else:
            fs_type = filesystem_type(path, mounts)
            if fs_type != 'tmpfs':
                errors.append('path: %s is on %s, not tmpfs; shm_reclaim only cleans shared-memory directories '
                              'such as /dev/shm' % (show(path), fs_type or 'an unknown file system'))
    return errors


def file_key(st):
    """What identifies a file across paths and mount namespaces: device and inode."""
    return (st.st_dev, st.st_ino)


def find_candidates(path, patterns):
    """Regular files directly in path whose name matches a glob, sorted by path.

    Each is a dict: path, name, size, mtime, key. lstat (follow_symlinks=False):
    a symlink named like a segment could point anywhere, and must not make us
    look at, let alone delete, its target.
    """
    candidates = []
    with os.scandir(path) as entries:
        for entry in entries:
            if not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in patterns):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # removed while we listed the directory
            if not stat.S_ISREG(st.st_mode):
                continue
            candidates.append({'path': os.path.join(path, entry.name), 'name': entry.name,
                               'size': st.st_size, 'mtime': st.st_mtime, 'key': file_key(st)})
    candidates.sort(key=lambda c: c['path'])
    return candidates


def open_file_keys(pid, proc_root=procfs.PROC):
    """(dev, ino) of every file the process has open, as a set; OSError if its fd directory cannot be listed."""
    keys = set()
    paths = set()
    for link, target in procfs.read_fd_links(pid, proc_root):
        # sockets, pipes and anon inodes ('socket:[123]') are no file of ours:
        # skip the stat, which is most of a server's fds
        if not target.startswith('/'):
            continue
        paths.add(target)
        try:
            # stat follows the magic link to the open file itself, even when its
            # path is not reachable from our mount namespace
            keys.add(file_key(os.stat(link)))
        except OSError:
            continue  # the fd was closed meanwhile
    return keys, paths


def parse_maps(text):
    """Lines of /proc/<pid>/maps as a set of (major, minor, inode) and a set of paths.

    A line is 'start-end perms offset major:minor inode   path', major and minor
    in hex; inode 0 is an anonymous mapping.
    """
    keys = set()
    paths = set()
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 5:
            continue
        major, sep, minor = fields[3].partition(':')
        try:
            inode = int(fields[4])
            dev = (int(major, 16), int(minor, 16))
        except ValueError:
            continue
        if not sep or inode == 0:
            continue
        keys.add(dev + (inode,))
        if len(fields) == 6:
            paths.add(fields[5])
    return keys, paths


def read_maps(pid, proc_root=procfs.PROC):
    """parse_maps of the process's maps; OSError if it cannot be read."""
    with open(os.path.join(proc_root, str(pid), 'maps'), 'rb') as maps:
        return parse_maps(maps.read().decode('utf-8', 'surrogateescape'))


def maps_key(key):
    """A file's (dev, ino) as /proc/<pid>/maps shows it: (major, minor, ino)."""
    dev, ino = key
    return (os.major(dev), os.minor(dev), ino)


class Holders(object):
    """Which processes hold which candidate files, from one pass over /proc."""

    def __init__(self, candidates, proc_root=procfs.PROC):
        self.proc_root = proc_root
        self.by_path = dict((c['path'], set()) for c in candidates)
        self.unreadable = []
        if candidates:
            for pid in procfs.list_pids(proc_root):
                self._scan(pid, candidates)

    def _scan(self, pid, candidates):
        unreadable = False
        for reader, key_of in ((open_file_keys, lambda c: c['key']), (read_maps, lambda c: maps_key(c['key']))):
            try:
                keys, paths = reader(pid, self.proc_root)
            except OSError as exc:
                # another user's process without root (EACCES) cannot be seen
                # into; one that exited (ENOENT, ESRCH) holds nothing
                if exc.errno not in GONE:
                    unreadable = True
                continue
            for candidate in candidates:
                # by inode first; the path as well, for filesystems (overlayfs,
                # btrfs subvolumes) whose maps device differs from stat's: a
                # false match only keeps a file, never removes a held one
                if key_of(candidate) in keys or candidate['path'] in paths:
                    self.by_path[candidate['path']].add(pid)
        if unreadable:
            self.unreadable.append(pid)

    def of(self, path):
        """Holders of a candidate file as [{pid, name}], sorted by pid."""
        return [{'pid': pid, 'name': procfs.read_comm(pid, self.proc_root) or ''}
                for pid in sorted(self.by_path.get(path, ()))]


def classify(candidates, holders, min_age, now):
    """Split the candidates into (stale, kept) result entries."""
    stale = []
    kept = []
    for candidate in candidates:
        entry = {'path': candidate['path'], 'size': candidate['size'], 'holders': holders.of(candidate['path'])}
        if entry['holders']:
            entry['reason'] = 'held'
            kept.append(entry)
        elif now - candidate['mtime'] < min_age:
            entry['reason'] = 'younger than min_age'
            kept.append(entry)
        else:
            stale.append(entry)
    return stale, kept


def remove(entries, candidates):
    """Unlink the stale files; (removed entries, error messages). Tries every file."""
    keys = dict((c['path'], c['key']) for c in candidates)
    removed = []
    errors = []
    for entry in entries:
        try:
            # a file re-created under the same name since the scan is a new
            # segment, maybe about to be mapped: not the one we judged stale
            if file_key(os.lstat(entry['path'])) != keys[entry['path']]:
                continue
            os.unlink(entry['path'])
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue  # someone else removed it: nothing left to do
            errors.append('%s: %s' % (entry['path'], exc.strerror or exc))
            continue
        removed.append(entry)
    return removed, errors


def reclaim_shm(path, patterns, min_age, check_mode, proc_root=procfs.PROC, now=None):
    """The whole job, without AnsibleModule: a result dict, with 'errors' (a list) when removals failed."""
    result = {'changed': False, 'removed': [], 'kept': [], 'bytes_freed': 0, 'unreadable_pids': []}
    if not os.path.isdir(path):
        result['msg'] = '%s does not exist, nothing to reclaim' % path
        return result
    candidates = find_candidates(path, patterns)
    holders = Holders(candidates, proc_root)
    stale, kept = classify(candidates, holders, min_age, time.time() if now is None else now)
    result.update(changed=bool(stale), kept=kept, unreadable_pids=holders.unreadable)
    removed, errors = (stale, []) if check_mode else remove(stale, candidates)
    result.update(removed=removed, bytes_freed=sum(e['size'] for e in removed))
    if errors:
        result['errors'] = errors
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='str', default='/dev/shm'),
            patterns=dict(type='list', elements='str', default=['nccl-*', 'psm_*']),
            min_age=number_option('float', default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    errors = validate(params)
    if errors:
        module.fail_json(msg='; '.join(errors))

    try:
        result = reclaim_shm(params['path'], params['patterns'], params['min_age'], module.check_mode)
    except OSError as exc:
        # the directory itself could not be listed (permissions)
        module.fail_json(msg='path: cannot read %s: %s' % (show(params['path']), exc))
    errors = result.pop('errors', None)
    if errors:
        module.fail_json(msg='could not remove %d file(s): %s' % (len(errors), '; '.join(errors)), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
