# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/shard_repair: a damaged file moved aside (never in check mode, never under a running job)."""

from __future__ import annotations

import os

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_repair import JOB_LOCK, repair_shard
from job_package import job_manifest  # tests/unit/job_package.py


def shard_with_a_damaged_file(tmp_path):
    shard = tmp_path / 'testjob' / 'shard-0-of-1'
    m = job_manifest().open_manifest(str(shard))
    m.pin(job='testjob', shard_index=0, shard_count=1, dataset_sha256='d' * 64)
    _idx, relpath = m.reserve('s1', lambda idx: 'rows_0-2000/data_%d.ckpt' % idx)
    (shard / 'rows_0-2000').mkdir()
    (shard / relpath).write_bytes(b'a flipped byte')
    m.finish('s1', 3, len(b'a flipped byte'), 'e' * 64)
    m.close()
    return str(shard), relpath


def test_repair_in_check_mode_names_the_damaged_file_and_moves_nothing(tmp_path):
    shard, relpath = shard_with_a_damaged_file(tmp_path)
    report = repair_shard(shard, checksums=True, check_mode=True)
    assert [(r['sample_id'], r['path']) for r in report['redo']] == [('s1', relpath)]
    assert report['start'] and report['moved'] == []
    assert os.path.exists(os.path.join(shard, relpath))
    assert not os.path.exists(os.path.join(shard, 'damaged'))


def test_repair_leaves_a_shard_whose_job_runs_alone(tmp_path):
    # the job holds its output dir's lock while it runs: a file moved under it would be lost to it
    shard, relpath = shard_with_a_damaged_file(tmp_path)
    lock = job_manifest().lock_output_dir(shard, wait=False)
    try:
        report = repair_shard(shard, checksums=True, check_mode=False)
    finally:
        os.close(lock)
    assert report['busy'] and report['moved'] == [] and not report['start']
    assert os.path.exists(os.path.join(shard, relpath))


def test_the_job_and_the_repair_lock_the_same_file():
    assert JOB_LOCK == job_manifest().LOCK_NAME


def record_file_system_calls(monkeypatch):
    """Record os.link, os.replace, os.unlink and os.fsync (by the path its fd is open on), in order."""
    calls = []

    def recorded(name, real, describe):
        def call(*args, **kwargs):
            calls.append((name,) + describe(*args))
            return real(*args, **kwargs)
        monkeypatch.setattr(os, name, call)
    recorded('link', os.link, lambda src, dst, **_kw: (str(src), str(dst)))
    recorded('replace', os.replace, lambda src, dst, **_kw: (str(src), str(dst)))
    recorded('unlink', os.unlink, lambda path, **_kw: (str(path),))
    recorded('fsync', os.fsync, lambda fd: (os.readlink('/proc/self/fd/%d' % fd),))
    return calls


def test_the_damaged_files_new_name_is_durable_before_its_old_name_is_removed(tmp_path, monkeypatch):
    # a crash (power lost) after the old name's removal reached the disk but before the new
    # name did would lose the file: link, fsync of damaged/, then unlink, then fsync of the
    # old dir. The end state alone is the same whatever the order.
    shard, relpath = shard_with_a_damaged_file(tmp_path)
    src = os.path.join(shard, relpath)
    aside = os.path.join(shard, 'damaged')
    calls = record_file_system_calls(monkeypatch)
    report = repair_shard(shard, checksums=True, check_mode=False)
    monkeypatch.undo()
    (target,) = report['moved']
    assert os.path.dirname(target) == aside

    def first(call):
        assert call in calls, calls
        return calls.index(call)
    linked = first(('link', src, target))
    reason = next(n for n, c in enumerate(calls) if c[0] == 'replace' and c[2] == target + '.reason')
    aside_durable = first(('fsync', aside))
    unlinked = first(('unlink', src))
    old_dir_durable = max(n for n, c in enumerate(calls) if c == ('fsync', os.path.dirname(src)))
    assert linked < aside_durable and reason < aside_durable
    assert aside_durable < unlinked < old_dir_durable
    with open(target, 'rb') as f:
        assert f.read() == b'a flipped byte'
