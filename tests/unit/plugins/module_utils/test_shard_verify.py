# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/shard_verify: one shard's output proven on its host (the samples the job could not
extract with their reasons, a damaged card or manifest)."""

from __future__ import annotations

import json
import os
import sqlite3

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import (
    FAILURES_SHOWN, accept_failed_error, verify_shard)
from job_package import job_manifest  # tests/unit/job_package.py


def shard_with_failures(tmp_path, failed):
    shard = tmp_path / 'testjob' / 'shard-0'
    m = job_manifest().open_manifest(str(shard))
    m.pin(job='testjob', shard_index=0, shard_count=1, dataset_sha256='d' * 64)
    for n in range(failed):
        m.record_failure('s%05d' % n, 'refused by the server: HTTP 400: longer than the context')
    m.close()
    (shard / 'dataset_card.json').write_text(json.dumps(
        {'samples': 0, 'tokens': 0, 'bytes': 0, 'dataset_sha256': 'd' * 64, 'complete': False,
         'shard_samples': failed}))
    return str(shard)


def test_verify_names_each_sample_that_failed_and_why(tmp_path):
    report = verify_shard(shard_with_failures(tmp_path, 2))
    assert report['failed'] == 2
    failed_lines = [p for p in report['problems'] if 'not extracted' in p]
    assert len(failed_lines) == 2
    assert failed_lines[0].startswith('s00000: not extracted') and 'longer than the context' in failed_lines[0]


def test_verify_shows_a_bounded_number_of_failures_and_counts_the_rest(tmp_path):
    report = verify_shard(shard_with_failures(tmp_path, FAILURES_SHOWN + 5))
    assert len([p for p in report['problems'] if 'not extracted' in p]) == FAILURES_SHOWN
    assert any(p.startswith('5 more samples failed') for p in report['problems'])


def test_a_fifo_in_place_of_the_card_does_not_hang(tmp_path):
    shard = shard_with_failures(tmp_path, 0)
    os.unlink(os.path.join(shard, 'dataset_card.json'))
    os.mkfifo(os.path.join(shard, 'dataset_card.json'))
    assert any('no readable dataset_card.json (not a regular file)' in p for p in verify_shard(shard)['problems'])


def test_a_manifest_that_is_not_a_database_is_named_with_its_path(tmp_path):
    shard = tmp_path / 'shard-0'
    shard.mkdir()
    (shard / 'manifest.sqlite').write_bytes(b'not sqlite at all' * 100)
    (problem,) = verify_shard(str(shard))['problems']
    assert problem.startswith(str(shard / 'manifest.sqlite') + ": cannot be read as the job's manifest")


def test_a_done_row_with_a_null_token_count_is_named_with_the_manifest_not_a_traceback(tmp_path):
    # before: TypeError (int += None) out of the module, naming no file
    shard = shard_with_failures(tmp_path, 0)
    manifest = os.path.join(shard, 'manifest.sqlite')
    db = sqlite3.connect(manifest)
    db.execute("INSERT INTO samples (sample_id, idx, path, state, tokens, bytes, sha256) "
               "VALUES ('s1', 0, 'rows_0-2000/data_0.ckpt', 'done', NULL, 10, ?)", ('a' * 64,))
    db.execute("INSERT INTO samples (sample_id, idx, path, state, tokens, bytes, sha256) "
               "VALUES ('s2', 1, 'rows_0-2000/data_1.ckpt', 'done', 5, NULL, NULL)")
    db.commit()
    db.close()
    report = verify_shard(shard)
    damaged = [p for p in report['problems'] if 'damaged manifest' in p]
    assert damaged == [
        "%s: the row of sample 's1' holds tokens=NULL, which no sound manifest does (a damaged manifest): that "
        "sample is not counted as extracted" % manifest,
        "%s: the row of sample 's2' holds bytes=NULL, which no sound manifest does (a damaged manifest): that "
        "sample is not counted as extracted" % manifest]
    assert report['samples'] == 0 and report['tokens'] == 0


def test_a_damaged_or_missing_file_names_the_repair_that_redoes_it(tmp_path):
    shard = tmp_path / 'testjob' / 'shard-0-of-1'
    m = job_manifest().open_manifest(str(shard))
    m.pin(job='testjob', shard_index=0, shard_count=1, dataset_sha256='d' * 64)
    (shard / 'rows_0-2000').mkdir()
    for sample_id, written in (('flipped', b'a flipped byte'), ('short', b'cut'), ('gone', None)):
        _idx, relpath = m.reserve(sample_id, lambda idx: 'rows_0-2000/data_%d.ckpt' % idx)
        if written is not None:
            (shard / relpath).write_bytes(written)
        m.finish(sample_id, 3, len(b'a flipped byte'), 'e' * 64)
    m.close()
    problems = verify_shard(str(shard))['problems']
    for sample_id in ('flipped', 'short', 'gone'):
        (line,) = [p for p in problems if p.startswith(sample_id + ': ')]
        assert 'playbooks/repair.yml' in line, line


def test_a_failed_sample_is_named_by_its_dataset_line_and_one_of_an_older_manifest_by_its_id(tmp_path):
    shard = shard_with_failures(tmp_path, 0)
    m = job_manifest().open_manifest(shard)
    m.record_failure('s7', 'refused by the server: HTTP 400', line=12)
    m.close()
    (line,) = [p for p in verify_shard(shard)['problems'] if 'not extracted' in p]
    assert line.startswith('s7 (line 12): not extracted, its last try failed (1 tries)')
    # a manifest made before failures had their line: the id alone, no failure to read it
    db = sqlite3.connect(os.path.join(shard, 'manifest.sqlite'))
    db.executescript('CREATE TABLE old AS SELECT sample_id, attempts, reason, at FROM failures; '
                     'DROP TABLE failures; ALTER TABLE old RENAME TO failures')
    db.close()
    (line,) = [p for p in verify_shard(shard)['problems'] if 'not extracted' in p]
    assert line.startswith('s7: not extracted, its last try failed (1 tries)')


def test_failures_the_user_accepts_pass_named_by_id_and_line_and_the_others_still_fail(tmp_path):
    """One refused sample left no way to a passing verify: extraction_job_accept_failed names it; verify passes on
    it (before the job, given the list, ended the shard complete, its card says incomplete) and names it."""
    shard = shard_with_failures(tmp_path, 0)
    m = job_manifest().open_manifest(shard)
    m.record_failure('s7', 'refused by the server: HTTP 400: too long', line=12)
    m.record_failure('s9', 'refused by the server: HTTP 400: bad', line=14)
    m.close()
    card = json.loads((tmp_path / 'testjob' / 'shard-0' / 'dataset_card.json').read_text())
    (tmp_path / 'testjob' / 'shard-0' / 'dataset_card.json').write_text(json.dumps(dict(card, shard_samples=2)))
    assert len(verify_shard(shard)['problems']) == 3    # the two failures, the shard not finished
    report = verify_shard(shard, accept_failed=['s7', 's9'])
    assert report['problems'] == []
    assert report['accepted'] == ['s7 (line 12): refused by the server: HTTP 400: too long',
                                  's9 (line 14): refused by the server: HTTP 400: bad']
    assert sorted(report['failed_ids']) == ['s7', 's9']
    # one accepted, one not: the other is named, and the shard is not finished without it
    problems = verify_shard(shard, accept_failed=['s7'])['problems']
    assert [p for p in problems if 'not extracted' in p] == [
        's9 (line 14): not extracted, its last try failed (1 tries): refused by the server: HTTP 400: bad']
    assert any('has not finished this shard' in p for p in problems)


def test_an_accepted_list_that_is_no_list_of_whole_ids_is_refused():
    assert accept_failed_error(['s7', 'conv_17.b-2']) is None and accept_failed_error([]) is None
    for bad in (['*'], ['s*'], ['s7', 's7'], 's7', [''], [7], ['a b']):
        assert accept_failed_error(bad), bad
