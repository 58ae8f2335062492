# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/status_table: status.yml's table of every host's shards, its totals and the shards
that report nothing."""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.module_utils.status_table import status_table


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


def eta_cells(table):
    start, end = table['lines'][0].index('ETA'), table['lines'][0].index('SHM GiB')
    return [line[start:end].strip() for line in table['lines'][1:]]


def test_a_stopped_unfinished_shard_has_no_eta_and_neither_has_the_job():
    # before: its last status.json's ETA, 0h00m (its last rate over the few tokens left), as if
    # it were about to end; a shard that is not running ends at no time
    running = {'shard_index': 0, 'shard_count': 3, 'state': 'running', 'alive': True, 'samples_done': 5,
               'samples_total': 8, 'tokens_per_s': 100.0, 'eta_s': 7200}
    killed = dict(running, shard_index=1, alive=False, eta_s=0)
    ended = dict(running, shard_index=2, state='incomplete', alive=False, eta_s=0)
    table = status_table([{'host': 'ct1', 'statuses': [running, killed, ended]}])
    assert eta_cells(table) == ['2h00m', 'stopped', 'stopped', '-']
    assert table['totals']['eta_s'] is None
    done = dict(running, state='complete', alive=False, samples_done=8, eta_s=0)
    table = status_table([{'host': 'ct1', 'statuses': [running, dict(done, shard_index=1), dict(done, shard_index=2)]}])
    assert eta_cells(table) == ['2h00m', '0h00m', '0h00m', '2h00m']


def state_cells(table):
    start, end = table['lines'][0].index('STATE'), table['lines'][0].index('DONE')
    return [line[start:end].strip() for line in table['lines'][1:]
            if not line.startswith(('TOTAL', 'STALLED', 'MISSING'))]


def test_a_stalled_shard_says_what_it_waits_on_and_whether_it_restarts_never_running():
    # the job's stall watchdog (eagle3_extraction_job/stall.py): a stalled shard whose process is still
    # ending is not "running", and one that stopped past the bound says so
    running = {'shard_index': 0, 'shard_count': 3, 'state': 'running', 'alive': True, 'samples_done': 5,
               'samples_total': 8, 'tokens_per_s': 100.0, 'eta_s': 60, 'stall_restarts_max': 3}
    waits = '16 requests sent and unanswered, the oldest for 912 s'
    restarting = dict(running, shard_index=1, state='stalled', stalled=waits, stall_restarts=1, stall_final=False)
    stopped = dict(running, shard_index=2, state='stalled', alive=False, stalled='nothing sent (3 samples left)',
                   stall_restarts=3, stall_final=True)
    table = status_table([{'host': 'ct1', 'statuses': [running, restarting, stopped]}])
    assert state_cells(table) == ['running', 'stalled, restart 1 of 3: ' + waits,
                                  'stalled, stopped after 3 restarts: nothing sent (3 samples left)']
    assert eta_cells(table)[1:4] == ['stopped', 'stopped', '-']
    assert table['totals']['stalled'] == ['ct1/1', 'ct1/2']
    assert table['lines'][-1].startswith('STALLED: ct1/1, ct1/2 made no progress'), table['lines']


def test_a_shard_started_again_after_a_stall_shows_its_restart_until_a_sample_settles():
    running = {'shard_index': 0, 'shard_count': 1, 'state': 'running', 'alive': True, 'samples_done': 5,
               'samples_total': 8, 'stall_restarts': 2, 'stall_restarts_max': 3}
    assert state_cells(status_table([{'host': 'ct1', 'statuses': [running]}])) == ['running (stall restart 2 of 3)']
    settled = dict(running, stall_restarts=0, stall_restarts_total=2)
    table = status_table([{'host': 'ct1', 'statuses': [settled]}])
    assert state_cells(table) == ['running'] and not table['lines'][-1].startswith('STALLED')
