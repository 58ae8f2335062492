# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/shard_status: a shard's status.json as status reads it; a damaged one is that shard's
message, never a broken table."""

from __future__ import annotations

import os

import pytest

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_status import read_status
from ansible_collections.eagle3.extraction.plugins.module_utils.status_table import status_table


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


def test_a_fifo_in_place_of_status_json_does_not_hang(tmp_path):
    shard = tmp_path / 'shard-0'
    shard.mkdir()
    os.mkfifo(str(shard / 'status.json'))
    assert 'not a regular file' in read_status(str(shard))['state']


def test_a_stalled_shards_status_json_reaches_the_table_with_its_restarts(tmp_path):
    # what the job's stall watchdog writes (eagle3_extraction_job/stall.py): read through, each of its type
    shard = tmp_path / 'shard-0'
    shard.mkdir()
    (shard / 'status.json').write_text(
        '{"state": "stalled", "stalled": "nothing sent (3 samples left)", "stalled_for_s": 901.5, "stall_final": true,'
        ' "stall_restarts": 3, "stall_restarts_total": 5, "stall_restarts_max": 3, "shard_index": 0,'
        ' "shard_count": 1, "samples_done": 5, "samples_total": 8}')
    status = read_status(str(shard))
    assert (status['stalled'], status['stall_final'], status['stall_restarts'], status['stall_restarts_total'],
            status['stall_restarts_max']) == ('nothing sent (3 samples left)', True, 3, 5, 3)
    lines = status_table([{'host': 'ct1', 'statuses': [status]}])['lines']
    assert 'stalled, stopped after 3 restarts: nothing sent (3 samples left)' in lines[1]
    # a flag that is no boolean is not taken as true
    (shard / 'status.json').write_text('{"state": "stalled", "stall_final": "yes"}')
    assert read_status(str(shard))['stall_final'] is False
