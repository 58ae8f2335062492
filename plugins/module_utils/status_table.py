# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml's report: every host's shard statuses (shard_status.read_status) made into one set of named
values (a shard's numbers, the hosts read, the totals and the whole job's ETA), shown as one table (a line per
host and shard) or, for scripts, as those values themselves (status_format=json). The table's cells are made
from the values, so that the two never disagree."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.text_table import table_lines

# One token a header, so that no header reads as two columns (nor wraps): FAILED, samples not done whose last
# try failed (a refused prompt, a rejected dump), from the manifest; BAD_LINES, the dataset's lines that are no
# sample (each counted by one shard, so the total is the dataset's); ERRORS, every error the job logged. TOK/S
# is the rate now: a shard not at work makes none ('-'), and the TOTAL is the sum of the rates above it.
HEADER = ('HOST', 'SHARD', 'STATE', 'DONE', 'OF', '%', 'TOK/S', 'ETA', 'SHM_GiB', 'OUT_FREE_GiB',
          'FAILED', 'BAD_LINES', 'ERRORS')
# the cells of a host line without a shard
BLANK = ('-',) * (len(HEADER) - 3)
# a state of a job at work: a shard in one of them whose process is gone has stopped
AT_WORK = ('running', 'paused', 'starting', 'draining leftovers')
# the status numbers the totals add up
SUMMED = ('samples_done', 'samples_total', 'tokens_done', 'tokens_total', 'samples_failed', 'bad_lines', 'errors')
# a shard's other numbers, as status.json has them (null when it has none)
KEPT = ('shm_used_bytes', 'shm_total_bytes', 'output_free_bytes', 'age_s', 'updated_at')


def _gib(n):
    return '%.1f' % ((n or 0) / 2.0 ** 30)


def _duration(seconds):
    if seconds is None:
        return '-'
    seconds = int(seconds)
    if seconds >= 86400:
        return '%dd%02dh' % (seconds // 86400, seconds % 86400 // 3600)
    return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


def _percent(done, total):
    return round(100.0 * done / total, 1) if total else None


def _text(value, form='%s'):
    return '-' if value is None else form % value


def _index(value):
    return '?' if value is None else str(value)


def _at_work(status):
    """A job is at work on the shard: its state says so and its process runs."""
    return status.get('state') in AT_WORK and bool(status.get('alive'))


def _stopped_unfinished(status):
    """Samples left and no job at work on them: the shard ends at no time until it is started again (its last
    status.json's ETA was its last rate over what was then left)."""
    return not _at_work(status) and (status.get('samples_done') or 0) < (status.get('samples_total') or 0)


def _stall_restarts(status):
    """'restart 2 of 3': the job's restarts after a stall since its last settled sample."""
    return 'restart %d of %d' % (status.get('stall_restarts') or 0, status.get('stall_restarts_max') or 0)


def _stalled(status):
    """A stalled shard (the job's stall watchdog): what it waits on, and whether the job restarts
    itself or has stopped for good (README "Recovery" says what to do)."""
    if status.get('stall_final'):
        then = 'stopped after %d restarts' % (status.get('stall_restarts') or 0)
    else:
        then = _stall_restarts(status)
    return 'stalled, %s: %s' % (then, (status.get('stalled') or '?')[:60])


def _state(status):
    state = status.get('state', '?')
    if state == 'stalled':
        return _stalled(status)
    if state in AT_WORK and not status.get('alive'):
        state = 'stopped (was %s)' % state
    elif state in AT_WORK and status.get('stall_restarts'):
        # started again after a stall and no sample settled yet
        state += ' (stall %s)' % _stall_restarts(status)
    if status.get('paused'):
        state += ': ' + status['paused'][:40]
    return state


def shard_values(host, status):
    """One shard's named values: status.json's numbers (0 for a count it lacks), what the table's cells say
    (``state_text``, ``eta`` and ``percent``), whether a job is at work on it and its rate now (null when none
    is: a finished or stopped shard makes no tokens, whatever its last status.json said)."""
    at_work = _at_work(status)
    stopped = _stopped_unfinished(status)
    shard = {'host': host, 'shard_index': status.get('shard_index'), 'shard_count': status.get('shard_count'),
             'shard_dir': status.get('shard_dir'), 'state': status.get('state', '?'), 'state_text': _state(status),
             'alive': bool(status.get('alive')), 'at_work': at_work, 'stopped': stopped,
             'stalled': status.get('stalled') or '', 'paused': status.get('paused') or ''}
    shard.update((key, int(status.get(key) or 0)) for key in SUMMED)
    shard.update((key, status.get(key)) for key in KEPT)
    shard.update(percent=_percent(shard['samples_done'], shard['samples_total']),
                 tokens_per_s=float(status.get('tokens_per_s') or 0) if at_work else None,
                 eta_s=None if stopped else status.get('eta_s'))
    shard['eta'] = 'stopped' if stopped else _duration(shard['eta_s'])
    return shard


def _shard_row(s):
    return (s['host'], '%s/%s' % (_index(s['shard_index']), _index(s['shard_count'])),
            s['state_text'], str(s['samples_done']), str(s['samples_total']), _text(s['percent'], '%.1f'),
            _text(s['tokens_per_s'], '%.0f'), s['eta'],
            '%s/%s' % (_gib(s['shm_used_bytes']), _gib(s['shm_total_bytes'])), _gib(s['output_free_bytes']),
            str(s['samples_failed']), str(s['bad_lines']), str(s['errors']))


def _add_shard(totals, s):
    """Add one shard to the totals. The whole job's ETA is the slowest shard's (they run in parallel), unknown
    once a shard with samples left has none or has stopped; its rate is the sum of the shards at work."""
    totals['shards'] += 1
    for key in SUMMED:
        totals[key] += s[key]
    if s['at_work']:
        totals['shards_at_work'] += 1
        totals['tokens_per_s'] += s['tokens_per_s']
    if s['state'] == 'stalled':
        totals['stalled'].append('%s/%s' % (s['host'], _index(s['shard_index'])))
    if totals['eta_s'] is None:
        return
    if s['stopped'] or (s['eta_s'] is None and s['samples_done'] < s['samples_total']):
        totals['eta_s'] = None
    elif s['eta_s'] is not None:
        totals['eta_s'] = max(totals['eta_s'], s['eta_s'])


def _finish_totals(totals, counts, reported):
    """The shards the statuses say the job has and those that reported: a shard that never started (or whose
    host was not read) has no row, its samples are in no total, and the job has no ETA."""
    expected = max((c for c in counts if isinstance(c, int) and c > 0), default=0)
    totals['shard_count'] = expected
    totals['shards_missing'] = sorted(set(range(expected)) - reported)
    if totals['shards_missing'] or not totals['shards']:
        totals['eta_s'] = None
    totals['tokens_per_s'] = round(totals['tokens_per_s'], 1)
    totals['percent'] = _percent(totals['samples_done'], totals['samples_total'])
    totals['eta'] = _duration(totals['eta_s'])
    # status_until_complete's rule (status.yml)
    totals['complete'] = (totals['samples_total'] > 0 and totals['samples_done'] == totals['samples_total']
                          and not totals['shards_missing'])


def _total_row(totals):
    return ('TOTAL', str(totals['shards']), '', str(totals['samples_done']), str(totals['samples_total']),
            _text(totals['percent'], '%.1f'),
            '%.0f' % totals['tokens_per_s'] if totals['shards_at_work'] else '-', totals['eta'], '', '',
            str(totals['samples_failed']), str(totals['bad_lines']), str(totals['errors']))


def _notes(totals):
    notes = []
    if totals['stalled']:
        notes.append('STALLED: %s made no progress while the server was healthy (README "Recovery": what it '
                     'waits on is in its STATE; its log says more)' % ', '.join(totals['stalled']))
    if totals['shards_missing']:
        notes.append('MISSING: shard(s) %s of %d report no status (never started, or its host was not read): '
                     'their samples are in no total' % (', '.join(map(str, totals['shards_missing'])),
                                                        totals['shard_count']))
    return notes


def status_table(reports):
    """``reports``: ``[{host, statuses: [read_status...]} or {host, error}]`` -> ``{lines, text, totals, report}``:
    the table's lines, the same joined into one block, the totals, and ``report`` (``shards``, ``hosts``,
    ``totals``: what status_format=json prints)."""
    rows = [HEADER]
    shards, hosts = [], []
    totals = dict(dict.fromkeys(SUMMED, 0), tokens_per_s=0.0, shards_at_work=0, eta_s=0, shards=0, stalled=[])
    counts, reported = set(), set()
    for report in sorted(reports, key=lambda r: r['host']):
        statuses = [] if report.get('error') else report.get('statuses') or []
        hosts.append({'host': report['host'], 'error': report.get('error') or None, 'shards': len(statuses)})
        if report.get('error'):
            rows.append((report['host'], '-', 'unreachable: %s' % report['error'][:60]) + BLANK)
            totals['eta_s'] = None
        elif not statuses:
            rows.append((report['host'], '-', 'no job') + BLANK)
        for status in statuses:
            shard = shard_values(report['host'], status)
            shards.append(shard)
            rows.append(_shard_row(shard))
            _add_shard(totals, shard)
            counts.add(shard['shard_count'])
            reported.add(shard['shard_index'])
    _finish_totals(totals, counts, reported)
    rows.append(_total_row(totals))
    lines = table_lines(rows) + _notes(totals)
    return {'lines': lines, 'text': '\n'.join(lines), 'totals': totals,
            'report': {'shards': shards, 'hosts': hosts, 'totals': totals}}
