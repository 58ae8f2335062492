# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify's totals count each sample once, however many shard dirs hold it.

Shard output dirs are made with the job's own manifest module (rows committed as the job
commits them, real files with their sizes and sha256), read by the extraction_verify
module on each host (job_dir) and added up on the controller (the filter extraction_verify_union), as
verify.yml does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3

from ansible_collections.eagle3.extraction.plugins.filter.extraction_reports import extraction_verify_union
from ansible_collections.eagle3.extraction.plugins.modules import extraction_verify
from job_package import job_manifest  # tests/unit/job_package.py


DATASET = 'd' * 64
SHARD_COUNT = 3
# (sample id, tokens, file bytes): three a shard, each with its own numbers
SHARDS = [[('s%05d' % (3 * i + k), 5 + 3 * i + k, 1000 + 100 * (3 * i + k)) for k in range(3)]
          for i in range(SHARD_COUNT)]
ALL = [s for shard in SHARDS for s in shard]


def make_shard(job_dir, index, samples, complete=True):
    """One shard's output dir as the job leaves it: manifest rows done, files, card."""
    shard = os.path.join(str(job_dir), 'shard-%d-of-%d' % (index, SHARD_COUNT))
    m = job_manifest().open_manifest(shard)
    m.pin(job='testjob', shard_index=index, shard_count=SHARD_COUNT, dataset_sha256=DATASET)
    for sample_id, tokens, nbytes in samples:
        _idx, relpath = m.reserve(sample_id, lambda idx: 'rows_0-2000/data_%d.ckpt' % idx)
        data = (sample_id.encode() * nbytes)[:nbytes]
        os.makedirs(os.path.dirname(os.path.join(shard, relpath)), exist_ok=True)
        with open(os.path.join(shard, relpath), 'wb') as f:
            f.write(data)
        m.finish(sample_id, tokens, nbytes, hashlib.sha256(data).hexdigest())
    m.close()
    with open(os.path.join(shard, 'dataset_card.json'), 'w') as f:
        json.dump({'samples': len(samples), 'tokens': sum(s[1] for s in samples),
                   'bytes': sum(s[2] for s in samples), 'dataset_sha256': DATASET,
                   'dataset_samples': len(ALL), 'shard_samples': len(SHARDS[index]),
                   'complete': complete}, f)
    return shard


def verify(run_module, hosts):
    """verify.yml: the module on each host's job dir (it does not fail on what it finds), then the filter on the
    controller over the reports."""
    reports = []
    for host, job_dir in sorted(hosts.items()):
        result = run_module(extraction_verify, {'job_dir': str(job_dir)})
        assert not result.get('failed') and not result['changed']
        reports.append({'host': host, 'shards': result['shards']})
    return extraction_verify_union(reports)


def expected_line(samples):
    return 'verified: %d samples exactly once, %d tokens, %d bytes' % (
        len(samples), sum(s[1] for s in samples), sum(s[2] for s in samples))


def test_copies_of_a_handed_over_shard_count_once_in_every_total(tmp_path, run_module):
    hosts = {h: tmp_path / h / 'testjob' for h in ('ct1', 'ct2', 'ct3')}
    make_shard(hosts['ct1'], 0, SHARDS[0])
    # shard 1 was handed from ct1 to ct2: ct1 came back with the part it had done
    make_shard(hosts['ct1'], 1, SHARDS[1][:2], complete=False)
    make_shard(hosts['ct2'], 1, SHARDS[1])
    # shard 2 finished on ct3 and, after the handover, on ct2 as well
    shutil.copytree(make_shard(hosts['ct3'], 2, SHARDS[2]),
                    str(hosts['ct2'] / 'shard-2-of-3'))
    result = verify(run_module, hosts)
    assert result['problems'] == [], result
    totals = result['totals']
    assert totals['unique_samples'] == totals['samples'] == len(ALL)
    assert totals['tokens'] == sum(s[1] for s in ALL)
    assert totals['bytes'] == sum(s[2] for s in ALL)
    assert result['msg'].startswith(expected_line(ALL) + '; ')
    assert len(result['notes']) == 2


def test_without_copies_the_totals_are_the_shards_sums(tmp_path, run_module):
    hosts = {'ct%d' % (i + 1): tmp_path / ('ct%d' % (i + 1)) / 'testjob' for i in range(SHARD_COUNT)}
    for i, samples in enumerate(SHARDS):
        make_shard(hosts['ct%d' % (i + 1)], i, samples)
    result = verify(run_module, hosts)
    assert result['msg'] == expected_line(ALL) and result['notes'] == []


def test_a_sample_in_two_different_shards_fails_verify_naming_it(tmp_path, run_module):
    hosts = {'ct%d' % (i + 1): tmp_path / ('ct%d' % (i + 1)) / 'testjob' for i in range(SHARD_COUNT)}
    for i, samples in enumerate(SHARDS):
        make_shard(hosts['ct%d' % (i + 1)], i, samples)
    # shard 2's manifest also lists shard 0's first sample (a shard split that overlaps)
    shard2 = str(hosts['ct3'] / 'shard-2-of-3')
    db = sqlite3.connect(os.path.join(shard2, 'manifest.sqlite'))
    db.execute("UPDATE samples SET sample_id = ? WHERE sample_id = ?", (SHARDS[0][0][0], SHARDS[2][0][0]))
    db.commit()
    db.close()
    result = verify(run_module, hosts)
    assert result['msg'].startswith('%d problem(s): ' % len(result['problems']))
    assert any(p.startswith('%s is stored twice: ct1:' % SHARDS[0][0][0]) and 'ct3:' in p
               for p in result['problems'])
    assert result['totals']['unique_samples'] == len(ALL) - 1


def test_an_accepted_selection_that_could_match_every_failure_is_refused_naming_the_variable(tmp_path, run_module):
    for bad in (['*'], ['s1', 's1'], ['s?']):
        result = run_module(extraction_verify, {'job_dir': str(tmp_path), 'accept_failed': bad})
        assert result['failed'] and result['msg'].startswith('extraction_job_accept_failed=%r: ' % bad), result
