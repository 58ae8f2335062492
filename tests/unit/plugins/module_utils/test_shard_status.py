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
