# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""extraction_repair run in-process on a shard dir the job's own manifest module made: a damaged
file is moved aside (kept, under a name SpecForge's loader skips), a missing one needs no move, the
shard is named for its unit to be started; check mode moves nothing; a bad job_dir is refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ansible_collections.eagle3.extraction.plugins.modules import extraction_repair
from job_package import job_manifest  # tests/unit/job_package.py


@pytest.fixture
def job_dir(tmp_path):
    """shard 1 of 2 with three finished files: one damaged, one missing, one sound."""
    shard = tmp_path / 'testjob' / 'shard-1-of-2'
    m = job_manifest().open_manifest(str(shard))
    m.pin(job='testjob', shard_index=1, shard_count=2, dataset_sha256='d' * 64)
    (shard / 'rows_0-2000').mkdir()
    for sample_id in ('damaged', 'missing', 'sound'):
        _idx, relpath = m.reserve(sample_id, lambda idx: 'rows_0-2000/data_%d.ckpt' % idx)
        data = ('the bytes of %s' % sample_id).encode()
        (shard / relpath).write_bytes(data)
        m.finish(sample_id, 3, len(data), hashlib.sha256(data).hexdigest())
    m.close()
    (shard / 'rows_0-2000' / 'data_0.ckpt').write_bytes(b'the bytes of damagee')   # same size, other bytes
    os.unlink(str(shard / 'rows_0-2000' / 'data_1.ckpt'))
    (shard / 'dataset_card.json').write_text('{"complete": true}')
    return tmp_path / 'testjob'


def test_a_damaged_file_is_moved_aside_and_its_shard_named_to_start(run_module, job_dir):
    result = run_module(extraction_repair, {'job_dir': str(job_dir)})
    shard = job_dir / 'shard-1-of-2'
    assert result['changed'] and result['start_shards'] == [1] and result['busy'] == []
    (report,) = result['shards']
    assert [(r['sample_id'], r['problem']) for r in report['redo']] == [
        ('damaged', 'does not match its sha256'), ('missing', 'is missing')]
    assert not (shard / 'rows_0-2000' / 'data_0.ckpt').exists()
    (moved,) = report['moved']
    assert Path(moved).parent == shard / 'damaged' and not moved.endswith('.ckpt')
    assert Path(moved).read_bytes() == b'the bytes of damagee'
    assert 'does not match its sha256' in Path(moved + '.reason').read_text()
    assert (shard / 'rows_0-2000' / 'data_2.ckpt').read_bytes() == b'the bytes of sound'
    # done once: a second run finds only the missing files, for the job to redo, and moves nothing
    again = run_module(extraction_repair, {'job_dir': str(job_dir)})
    assert not again['changed'] and again['start_shards'] == [1]


def test_check_mode_names_what_would_be_moved_and_moves_nothing(run_module, job_dir):
    result = run_module(extraction_repair, {'job_dir': str(job_dir), '_ansible_check_mode': True})
    shard = job_dir / 'shard-1-of-2'
    assert result['changed'] and result['start_shards'] == [1]
    assert (shard / 'rows_0-2000' / 'data_0.ckpt').exists()
    assert not (shard / 'damaged').exists() and not (shard / 'job.lock').exists()
    assert any('check mode: not moved' in line for line in result['lines'])


def test_without_checksums_a_file_of_the_right_size_passes(run_module, job_dir):
    result = run_module(extraction_repair, {'job_dir': str(job_dir), 'checksums': False})
    assert not result['changed']
    assert [r['sample_id'] for r in result['shards'][0]['redo']] == ['missing']


@pytest.mark.parametrize('value', ['relative/dir', '/'])
def test_a_job_dir_that_is_not_an_absolute_path_other_than_root_is_refused(run_module, value):
    result = run_module(extraction_repair, {'job_dir': value})
    assert result['failed'] and result['msg'].startswith('job_dir=%r' % value)
