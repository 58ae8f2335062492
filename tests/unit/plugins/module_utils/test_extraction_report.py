# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/extraction_report: what verify and status read and print (the samples the job could not
extract with their reasons, damaged files, the line verify.yml prints)."""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.eagle3.extraction.plugins.module_utils.extraction_report import (
    FAILURES_SHOWN, JOB_LOCK, config_output_dir, read_status, repair_shard, status_table, verified_message, verify_shard,
    verify_union)
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


def test_the_status_table_has_the_failed_samples_of_each_shard_and_their_total():
    status = {'shard_index': 0, 'shard_count': 2, 'state': 'incomplete', 'alive': False, 'samples_done': 7,
              'samples_total': 8, 'samples_failed': 1, 'errors': 3}
    table = status_table([{'host': 'ct1', 'statuses': [status]},
                          {'host': 'ct2', 'statuses': [dict(status, shard_index=1, samples_failed=2)]}])
    header = re.split(r'\s{2,}', table['lines'][0].strip())
    column = header.index('FAILED')
    cells = [re.split(r'\s{2,}', line.strip()) for line in table['lines'][1:]]
    assert [row[column] for row in cells[:2]] == ['1', '2']
    assert table['totals']['samples_failed'] == 3


@pytest.mark.parametrize('content', ['[1, 2]', '{"samples_done": "7", "samples_total": 8}', '{"eta_s": NaN}',
                                     '{"state": "running", "samples_total": ', '\xff\xfe'])
def test_a_damaged_status_json_is_one_shards_message_not_a_broken_table(tmp_path, content):
    shard = tmp_path / 'shard-0'
    shard.mkdir()
    (shard / 'status.json').write_bytes(content.encode('latin-1'))
    status = read_status(str(shard))
    assert status['state'].startswith('unreadable status.json') and not status['alive']
    lines = status_table([{'host': 'ct1', 'statuses': [status]}])['lines']
    assert 'unreadable status.json' in lines[1]


def test_a_fifo_in_place_of_status_json_or_the_card_does_not_hang(tmp_path):
    shard = tmp_path / 'shard-0'
    shard.mkdir()
    os.mkfifo(str(shard / 'status.json'))
    assert 'not a regular file' in read_status(str(shard))['state']
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


TOTALS = {'samples': 12, 'unique_samples': 10, 'tokens': 2048, 'bytes': 4096, 'files_checked': 12}


def test_the_totals_in_one_line():
    assert verified_message({'totals': TOTALS, 'problems': [], 'notes': []}) == (
        'verified: 10 samples exactly once, 2048 tokens, 4096 bytes')


def test_each_note_follows_the_totals():
    notes = ['ct2 holds a leftover copy of shard 1 (2 samples), not counted', 'ct3 holds another']
    assert verified_message({'totals': TOTALS, 'problems': [], 'notes': notes}) == (
        'verified: 10 samples exactly once, 2048 tokens, 4096 bytes; ' + '; '.join(notes))


def test_the_status_table_has_each_shards_bad_lines_and_their_total():
    # before: the bad lines were only in the containers' logs; the table said ERRORS 0
    status = {'shard_index': 0, 'shard_count': 2, 'state': 'complete', 'alive': False, 'samples_done': 8,
              'samples_total': 8, 'bad_lines': 3, 'errors': 0}
    table = status_table([{'host': 'ct1', 'statuses': [status]},
                          {'host': 'ct2', 'statuses': [dict(status, shard_index=1, bad_lines=1)]}])
    # the TOTAL row has empty cells: read the column by its place under the header
    start, end = table['lines'][0].index('BAD LINES'), table['lines'][0].index('ERRORS')
    assert [line[start:end].strip() for line in table['lines'][1:]] == ['3', '1', '4']
    assert table['totals']['bad_lines'] == 4


def test_a_shard_that_reports_no_status_is_named_and_the_job_is_not_complete():
    # before: a shard that never started had no row, and the TOTAL showed the others' 100 %
    status = {'shard_index': 0, 'shard_count': 3, 'state': 'complete', 'alive': False, 'samples_done': 8,
              'samples_total': 8, 'errors': 0}
    table = status_table([{'host': 'ct1', 'statuses': [status]},
                          {'host': 'ct2', 'statuses': [dict(status, shard_index=2)]}])
    assert table['totals']['shards_missing'] == [1]
    assert table['lines'][-1].startswith('MISSING: shard(s) 1 of 3 report no status'), table['lines']
    whole = status_table([{'host': 'ct1', 'statuses': [status, dict(status, shard_index=1), dict(status, shard_index=2)]}])
    assert whole['totals']['shards_missing'] == [] and not whole['lines'][-1].startswith('MISSING')


def complete_shard(tmp_path, name, index, bad_lines, shown):
    shard = tmp_path / 'testjob' / name
    m = job_manifest().open_manifest(str(shard))
    m.pin(job='testjob', shard_index=index, shard_count=2, dataset_sha256='d' * 64)
    m.close()
    (shard / 'dataset_card.json').write_text(json.dumps(
        {'samples': 0, 'tokens': 0, 'bytes': 0, 'dataset_sha256': 'd' * 64, 'complete': True, 'shard_samples': 0,
         'bad_lines': bad_lines, 'bad_lines_shown': shown}))
    return str(shard)


def test_verify_counts_the_datasets_bad_lines_and_names_them_in_its_summary(tmp_path):
    first = ["line 5 (no id): Expecting value", "line 9 (id 7): id must match"]
    shards = [verify_shard(complete_shard(tmp_path, 'shard-0-of-2', 0, 2, first)),
              verify_shard(complete_shard(tmp_path, 'shard-1-of-2', 1, 1, ["line 12 (id 'cut'): Unterminated"]))]
    assert [s['problems'] for s in shards] == [[], []]
    union = verify_union([{'host': 'ct1', 'shards': shards[:1]}, {'host': 'ct2', 'shards': shards[1:]}])
    assert union['problems'] == [] and union['totals']['bad_lines'] == 3
    message = verified_message(union)
    assert message.startswith('verified: 0 samples exactly once')
    assert ("3 bad lines of the dataset were not extracted: line 5 (no id): Expecting value; "
            "line 9 (id 7): id must match; line 12 (id 'cut'): Unterminated") in message


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


def test_config_output_dir_reads_the_shards_config(tmp_path):
    """What converged_state and extraction_job_outcome read to find a shard's status.json."""
    good, relative, broken = tmp_path / 'good.json', tmp_path / 'relative.json', tmp_path / 'broken.json'
    good.write_text(json.dumps({'output_dir': '/srv/eagle3-extraction/job/shard-0-of-1'}), encoding='utf-8')
    relative.write_text(json.dumps({'output_dir': 'shard-0'}), encoding='utf-8')
    broken.write_text('{', encoding='utf-8')
    assert config_output_dir(str(good)) == '/srv/eagle3-extraction/job/shard-0-of-1'
    assert config_output_dir(str(relative)) is None
    assert config_output_dir(str(broken)) is None
    assert config_output_dir(str(tmp_path / 'missing.json')) is None
