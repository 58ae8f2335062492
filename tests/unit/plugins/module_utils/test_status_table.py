# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/status_table: status.yml's table of every host's shards, its totals and the shards
that report nothing."""

from __future__ import annotations

import json
import re

from ansible_collections.eagle3.extraction.plugins.module_utils.status_table import HEADER, status_table


def table_rows(table):
    """The table's lines, the header's and the TOTAL's among them (not the notes below)."""
    lines = table['lines']
    return lines[:[line.split()[0] for line in lines].index('TOTAL') + 1]


def column(table, name):
    """A column's cells under the header, the TOTAL's last, each read at its header's place (a cell may hold
    single spaces, and the TOTAL row has empty cells)."""
    header = table['lines'][0]
    starts = [m.start() for m in re.finditer(r'\S+', header)] + [None]
    i = header.split().index(name)
    return [line[starts[i]:starts[i + 1]].strip() for line in table_rows(table)[1:]]


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
    assert column(table, 'BAD_LINES') == ['3', '1', '4']
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
    return column(table, 'ETA')


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
    return column(table, 'STATE')[:-1]


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


RUNNING = {'shard_index': 0, 'shard_count': 4, 'state': 'running', 'alive': True, 'samples_done': 5,
           'samples_total': 8, 'tokens_done': 500, 'tokens_total': 800, 'tokens_per_s': 1000.4, 'eta_s': 3600,
           'shm_used_bytes': 3 * 2 ** 30, 'shm_total_bytes': 16 * 2 ** 30, 'output_free_bytes': 200 * 2 ** 30}
STALLED = dict(RUNNING, shard_index=1, state='stalled', stalled='16 requests sent and unanswered, the oldest for '
               '912 s', stall_restarts=1, stall_restarts_max=3, eta_s=7200)


def test_the_table_is_one_block_of_one_line_headers_and_aligned_columns():
    # before: a YAML list of lines, whose folding split the header ('BAD' / 'LINES  ERRORS' on two lines)
    table = status_table([{'host': 'ct1', 'statuses': [RUNNING, STALLED]},
                          {'host': 'ct-unreachable', 'error': 'Failed to connect to the host via ssh'},
                          {'host': 'ct3', 'statuses': []}])
    assert table['text'] == '\n'.join(table['lines']) and table['text'].startswith('HOST ')
    # each header one token: a header cell never reads as two columns nor wraps at its space
    assert tuple(table['lines'][0].split()) == HEADER
    starts = [m.start() for m in re.finditer(r'\S+', table['lines'][0])]
    rows = table_rows(table)
    assert [line.split()[0] for line in rows] == ['HOST', 'ct-unreachable', 'ct1', 'ct1', 'ct3', 'TOTAL']
    for line in rows[1:-1]:
        # every cell starts under its header, two blanks after the cell before it (cells may hold single blanks)
        assert [line[start - 2:start + 1] for start in starts[1:]] == ['  ' + line[start] for start in starts[1:]]
        assert ' ' not in [line[start] for start in starts], line
    # the TOTAL's cells too, its empty ones (STATE, SHM_GiB, OUT_FREE_GiB) left blank
    assert [rows[-1][start] for start in starts] == ['T', '2', ' ', '1', '1', '6', '1', '-', ' ', ' ', '0', '0', '0']
    assert column(table, 'SHM_GiB')[1:3] == ['3.0/16.0', '3.0/16.0']
    assert column(table, 'OUT_FREE_GiB')[1] == '200.0'


def test_the_total_is_the_rate_of_the_shards_at_work_summed_and_the_slowest_eta():
    # before: TOTAL 0 tokens/s under rows of rates: a finished or stopped shard's row kept its last
    # status.json's rate, while the total counted the shards at work alone (and none once the job was done)
    finished = dict(RUNNING, shard_index=2, state='complete', alive=False, samples_done=8, tokens_per_s=900.0, eta_s=0)
    killed = dict(RUNNING, shard_index=3, alive=False, tokens_per_s=700.0)
    second = dict(RUNNING, shard_index=3, tokens_per_s=499.7, eta_s=5400)
    paused = dict(RUNNING, shard_index=1, state='paused', paused='/dev/shm above its high watermark',
                  tokens_per_s=12.0, eta_s=300)
    table = status_table([{'host': 'ct1', 'statuses': [RUNNING, finished]}, {'host': 'ct2', 'statuses': [second]},
                          {'host': 'ct3', 'statuses': [paused]}])
    # a paused shard is at work (it goes on under the low watermark): its rate counts
    assert column(table, 'TOK/S') == ['1000', '-', '500', '12', '1512']
    assert table['totals']['tokens_per_s'] == 1512.1 and table['totals']['shards_at_work'] == 3
    # the whole job ends with its slowest shard
    assert column(table, 'ETA') == ['1h00m', '0h00m', '1h30m', '0h05m', '1h30m']
    # a stalled shard makes no tokens (its last rate is from before the stall)
    table = status_table([{'host': 'ct1', 'statuses': [RUNNING, STALLED]}])
    assert column(table, 'TOK/S')[1:] == ['-', '1000']
    # a shard whose job was killed: no rate, and the job ends at no time
    table = status_table([{'host': 'ct1', 'statuses': [RUNNING, finished]}, {'host': 'ct2', 'statuses': [killed]},
                          {'host': 'ct3', 'statuses': [dict(RUNNING, shard_index=1, tokens_per_s=600.0)]}])
    assert column(table, 'TOK/S') == ['1000', '-', '-', '600', '1600']
    assert column(table, 'ETA')[-1] == '-' and table['totals']['eta_s'] is None


def test_a_finished_job_shows_no_rate_rather_than_a_total_of_0():
    done = dict(RUNNING, state='complete', alive=False, samples_done=8, tokens_per_s=900.0, eta_s=0)
    table = status_table([{'host': 'ct1', 'statuses': [done, dict(done, shard_index=1), dict(done, shard_index=2),
                                                       dict(done, shard_index=3)]}])
    assert column(table, 'TOK/S') == ['-'] * 5 and column(table, 'ETA')[-1] == '0h00m'
    assert table['totals']['complete'] and table['totals']['tokens_per_s'] == 0


def test_a_shard_that_never_reported_leaves_the_job_without_an_eta():
    table = status_table([{'host': 'ct1', 'statuses': [RUNNING]}])
    assert table['totals']['shards_missing'] == [1, 2, 3] and column(table, 'ETA') == ['1h00m', '-']
    assert not table['totals']['complete']


def test_the_json_report_has_each_shard_and_the_totals_as_named_numbers():
    table = status_table([{'host': 'ct1', 'statuses': [RUNNING, STALLED]},
                          {'host': 'ct2', 'error': 'Failed to connect to the host via ssh'}])
    report = json.loads(json.dumps(table['report']))   # what status_format=json prints, read back
    assert set(report) == {'shards', 'hosts', 'totals'}
    assert report['hosts'] == [{'host': 'ct1', 'error': None, 'shards': 2},
                               {'host': 'ct2', 'error': 'Failed to connect to the host via ssh', 'shards': 0}]
    first = report['shards'][0]
    assert {key: first[key] for key in ('host', 'shard_index', 'shard_count', 'state', 'state_text', 'at_work',
                                        'samples_done', 'samples_total', 'percent', 'tokens_per_s', 'eta_s', 'eta',
                                        'shm_used_bytes', 'output_free_bytes', 'samples_failed', 'bad_lines')} == {
        'host': 'ct1', 'shard_index': 0, 'shard_count': 4, 'state': 'running', 'state_text': 'running',
        'at_work': True, 'samples_done': 5, 'samples_total': 8, 'percent': 62.5, 'tokens_per_s': 1000.4,
        'eta_s': 3600, 'eta': '1h00m', 'shm_used_bytes': 3 * 2 ** 30, 'output_free_bytes': 200 * 2 ** 30,
        'samples_failed': 0, 'bad_lines': 0}
    assert report['shards'][1]['state'] == 'stalled' and report['shards'][1]['state_text'].startswith('stalled, ')
    totals = report['totals']
    assert (totals['samples_done'], totals['samples_total'], totals['tokens_per_s'], totals['shards']) == (
        10, 16, 1000.4, 2)
    assert report['shards'][1]['tokens_per_s'] is None and report['shards'][1]['eta'] == 'stopped'
    # ct2 was not read: the job's end is unknown, and shards 2 and 3 are in no total
    assert totals['eta_s'] is None and totals['shards_missing'] == [2, 3] and totals['complete'] is False
    assert totals['stalled'] == ['ct1/1']
