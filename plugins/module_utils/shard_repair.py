# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Making the job redo what verify finds damaged or missing in a shard (extraction_repair): a damaged
file is moved aside, never deleted, and the shard's unit is started to extract it again."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import (
    MANIFEST, MISSING, file_problem, read_card, read_manifest)

# the job holds <shard dir>/job.lock while it runs (the job's manifest.LOCK_NAME; a test checks they agree)
JOB_LOCK = 'job.lock'
# where the repair keeps a damaged file, under a name SpecForge's loader skips (no .ckpt at the end)
DAMAGED_DIR = 'damaged'
META = 'SELECT key, value FROM meta'
DONE = "SELECT sample_id, path, bytes, sha256 FROM samples WHERE state = 'done' ORDER BY idx"
WRITING = "SELECT COUNT(*) FROM samples WHERE state != 'done'"


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_aside(src, base):
    """Link src to base, or base.1, base.2 ... (never replaces a name taken); returns the new name."""
    target, n = base, 0
    while True:
        try:
            os.link(src, target)
            return target
        except FileExistsError:
            n += 1
            target = '%s.%d' % (base, n)


def _write_reason(target, relpath, reason):
    """``<target>.reason``, durable: a temporary name, fsync, rename."""
    tmp = os.path.join(os.path.dirname(target), '.%s.reason.tmp' % os.path.basename(target))
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write('%s: %s\n' % (relpath, reason))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target + '.reason')


def move_aside(shard_dir, relpath, reason, now=None):
    """Move a damaged file to ``<shard>/damaged/<name>.<time>`` with its reason beside it.

    Never deleted, never lost: the new name is linked and fsync'ed before the old one is
    removed, then the old dir is fsync'ed. Its new name does not end in ``.ckpt``, so
    SpecForge's loader does not read it. Returns the new path."""
    src = os.path.join(shard_dir, relpath)
    aside = os.path.join(shard_dir, DAMAGED_DIR)
    if not os.path.isdir(aside):
        os.mkdir(aside, 0o755)
        _fsync_dir(shard_dir)
    target = _link_aside(src, os.path.join(aside, '%s.%s' % (
        os.path.basename(relpath), time.strftime('%Y%m%dT%H%M%S', time.gmtime(now)))))
    _write_reason(target, relpath, reason)
    _fsync_dir(aside)
    os.unlink(src)
    _fsync_dir(os.path.dirname(src))
    return target


def _hold_job_lock(shard_dir, check_mode):
    """The shard's job lock, held (an fd), or ``None`` when no job ever ran here (check mode
    creates nothing). Raises BlockingIOError while the job runs."""
    path = os.path.join(shard_dir, JOB_LOCK)
    if check_mode and not os.path.exists(path):
        return None
    flags = os.O_RDONLY if check_mode else os.O_RDWR | os.O_CREAT
    fd = os.open(path, flags | getattr(os, 'O_NOFOLLOW', 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _finished(shard_dir):
    try:
        return bool(read_card(shard_dir).get('complete'))
    except (OSError, ValueError):
        return False


def _redo_damaged(report, shard_dir, manifest, checksums, check_mode):
    """Under the job's lock: each done row whose file is missing or damaged into ``redo`` (a damaged one moved
    aside, out of check mode), and whether the shard's unit should start."""
    try:
        meta, rows, writing = read_manifest(manifest, META, DONE, WRITING)
    except sqlite3.Error as exc:
        report['problems'].append('%s: cannot be read as the job\'s manifest: %s' % (manifest, exc))
        return
    index = dict(meta).get('shard_index')
    report['shard_index'] = int(index) if str(index).isdigit() else None
    for sample_id, relpath, nbytes, sha in rows:
        problem = file_problem(shard_dir, relpath, nbytes, sha, checksums)
        if problem is None:
            continue
        report['redo'].append({'sample_id': sample_id, 'path': relpath, 'problem': problem})
        if problem != MISSING and not check_mode:
            report['moved'].append(move_aside(shard_dir, relpath, problem))
    report['start'] = bool(report['redo']) or writing[0][0] > 0 or not _finished(shard_dir)


def repair_shard(shard_dir, checksums=True, check_mode=False):
    """Make the job redo what verify finds damaged or missing in one shard dir.

    A ``done`` row whose file is missing, of the wrong size or (``checksums``) sha256 is a
    sample to redo: a damaged file is moved aside (:func:`move_aside`), so that the job's
    next start finds the row without its file and extracts the sample again; the manifest
    is the job's and is not written here. Done under the job's lock: a shard whose job runs
    is left alone (``busy``). ``start``: the shard's unit should be started (samples to redo,
    half-written rows, or the shard not finished)."""
    report = {'shard_dir': shard_dir, 'shard_index': None, 'busy': False, 'redo': [], 'moved': [],
              'start': False, 'problems': []}
    manifest = os.path.join(shard_dir, MANIFEST)
    if not os.path.isfile(manifest):
        report['problems'].append('%s: no manifest.sqlite, nothing to redo here (extract.yml starts a shard)'
                                  % shard_dir)
        return report
    try:
        lock = _hold_job_lock(shard_dir, check_mode)
    except BlockingIOError:
        report['busy'] = True
        return report
    try:
        _redo_damaged(report, shard_dir, manifest, checksums, check_mode)
    finally:
        if lock is not None:
            os.close(lock)
    if report['start'] and report['shard_index'] is None:
        report['problems'].append('%s: its manifest names no shard index: start its unit yourself' % shard_dir)
    return report


def _shard_lines(shard):
    where = shard['shard_dir']
    if shard['busy']:
        return ['%s: its job is running (it holds %s): nothing moved; run the repair again once it has '
                'stopped' % (where, JOB_LOCK)]
    lines = list(shard['problems'])
    if shard['redo']:
        lines.append('%s: %d sample%s to redo' % (where, len(shard['redo']), '' if len(shard['redo']) == 1 else 's'))
    moved = iter(shard['moved'])
    for item in shard['redo']:
        line = '%s: %s %s' % (item['sample_id'], item['path'], item['problem'])
        if item['problem'] != MISSING:
            line += ': moved to %s' % next(moved, '<shard>/%s (check mode: not moved)' % DAMAGED_DIR)
        lines.append(line)
    if shard['start'] and not shard['redo']:
        lines.append('%s: not finished: its unit is started to go on' % where)
    return lines


def repair_lines(shards):
    """What a repair found and did, one line a shard and one a sample (for the playbook's output)."""
    lines = [line for shard in shards for line in _shard_lines(shard)]
    return lines or ['nothing to redo: every finished file is there, whole']
