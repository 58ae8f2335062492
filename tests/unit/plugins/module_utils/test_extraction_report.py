"""The line verify.yml prints (extraction_report.verified_message, extraction_verify's msg)."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.extraction_report import verified_message

TOTALS = {'samples': 12, 'unique_samples': 10, 'tokens': 2048, 'bytes': 4096, 'files_checked': 12}


def test_the_totals_in_one_line():
    assert verified_message({'totals': TOTALS, 'problems': [], 'notes': []}) == (
        'verified: 10 samples exactly once, 2048 tokens, 4096 bytes')


def test_each_note_follows_the_totals():
    notes = ['ct2 holds a leftover copy of shard 1 (2 samples), not counted', 'ct3 holds another']
    assert verified_message({'totals': TOTALS, 'problems': [], 'notes': notes}) == (
        'verified: 10 samples exactly once, 2048 tokens, 4096 bytes; ' + '; '.join(notes))
