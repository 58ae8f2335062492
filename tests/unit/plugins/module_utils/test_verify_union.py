# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/verify_union: the hosts' verify reports added up, and the line verify.yml prints."""

from __future__ import annotations

import json
import os

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import verify_shard
from ansible_collections.eagle3.extraction.plugins.module_utils.verify_union import verified_message, verify_union
from job_package import job_manifest  # tests/unit/job_package.py


TOTALS = {'samples': 12, 'unique_samples': 10, 'tokens': 2048, 'bytes': 4096, 'files_checked': 12}


def test_the_totals_in_one_line():
    assert verified_message({'totals': TOTALS, 'problems': [], 'notes': []}) == (
        'verified: 10 samples exactly once, 2048 tokens, 4096 bytes')


def test_each_note_follows_the_totals():
    notes = ['ct2 holds a leftover copy of shard 1 (2 samples), not counted', 'ct3 holds another']
    assert verified_message({'totals': TOTALS, 'problems': [], 'notes': notes}) == (
        'verified: 10 samples exactly once, 2048 tokens, 4096 bytes; ' + '; '.join(notes))


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


def shard_with_a_refused_sample(tmp_path, name, index, sample_id, line):
    shard = complete_shard(tmp_path, name, index, 0, [])
    m = job_manifest().open_manifest(shard)
    m.record_failure(sample_id, 'refused by the server: HTTP 400: too long', line=line)
    m.close()
    card = os.path.join(shard, 'dataset_card.json')
    with open(card, encoding='utf-8') as f:
        values = json.load(f)
    with open(card, 'w', encoding='utf-8') as f:
        json.dump(dict(values, complete=False, shard_samples=1), f)
    return shard


def test_accepted_failures_pass_named_and_an_accepted_id_that_did_not_fail_is_refused(tmp_path):
    shards = [shard_with_a_refused_sample(tmp_path, 'shard-0-of-2', 0, 's3', 4),
              shard_with_a_refused_sample(tmp_path, 'shard-1-of-2', 1, 's8', 9)]

    def union(accept):
        return verify_union([{'host': host, 'shards': [verify_shard(shard, accept_failed=accept)],
                              'accept_failed': accept} for host, shard in zip(('ct1', 'ct2'), shards)])
    assert len(union([])['problems']) == 4
    passed = union(['s3', 's8'])
    assert passed['problems'] == [] and passed['totals']['accepted_failed'] == 2
    assert verified_message(passed) == (
        'verified: 0 samples exactly once, 0 tokens, 0 bytes; 2 failed samples accepted as not extracted '
        '(extraction_job_accept_failed): s3 (line 4): refused by the server: HTTP 400: too long; '
        's8 (line 9): refused by the server: HTTP 400: too long')
    # an id that failed nowhere (extracted, or a typo) would hide a real failure later: refused, named
    refused = union(['s3', 's8', 's5'])
    assert refused['problems'] == ['extraction_job_accept_failed names s5, which did not fail on any shard '
                                   '(extracted, or no such sample): remove it']
