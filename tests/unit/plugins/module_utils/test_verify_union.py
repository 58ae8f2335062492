# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/verify_union: the hosts' verify reports added up, and the line verify.yml prints."""

from __future__ import annotations

import json

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
