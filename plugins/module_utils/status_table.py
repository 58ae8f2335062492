# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml's table: every host's shard statuses (shard_status.read_status) as one table, a line per
host and shard, with the totals and the whole job's ETA."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.text_table import table_lines

# FAILED: samples not done whose last try failed (a refused prompt, a rejected dump), from
# the manifest; BAD LINES: the dataset's lines that are no sample (each counted by one shard,
# so the total is the dataset's); ERRORS: every error the job logged
HEADER = ('HOST', 'SHARD', 'STATE', 'DONE', 'OF', '%', 'TOK/S', 'ETA', 'SHM GiB', 'OUT FREE GiB',
          'FAILED', 'BAD LINES', 'ERRORS')
# the cells of a host line without a shard
BLANK = ('-',) * (len(HEADER) - 3)
# a state of a job at work: a shard in one of them whose process is gone has stopped
AT_WORK = ('running', 'paused', 'starting', 'draining leftovers')
# the status numbers the totals add up
SUMMED = ('samples_done', 'samples_total', 'tokens_done', 'tokens_total', 'samples_failed', 'bad_lines', 'errors')


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
    return '%.1f' % (100.0 * done / total) if total else '-'


def _stopped_unfinished(status):
    """Samples left and no job at work on them: the shard ends at no time until it is started again (its last
    status.json's ETA was its last rate over what was then left)."""
    at_work = status.get('state') in AT_WORK and status.get('alive')
    return not at_work and (status.get('samples_done') or 0) < (status.get('samples_total') or 0)


def _eta(status):
    return 'stopped' if _stopped_unfinished(status) else _duration(status.get('eta_s'))


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


def _shard_row(host, s):
    done, total = s.get('samples_done', 0), s.get('samples_total', 0)
    return (host, '%s/%s' % (s.get('shard_index', '?'), s.get('shard_count', '?')), _state(s), str(done), str(total),
            _percent(done, total), '%.0f' % (s.get('tokens_per_s') or 0), _eta(s),
            '%s/%s' % (_gib(s.get('shm_used_bytes')), _gib(s.get('shm_total_bytes'))),
            _gib(s.get('output_free_bytes')), str(s.get('samples_failed', 0)),
            str(s.get('bad_lines', 0)), str(s.get('errors', 0)))


def _add_shard(totals, s):
    """Add one shard's status to the totals. The whole job's ETA is the slowest shard's (they run in
    parallel), unknown once a shard with samples left has none or has stopped."""
    totals['shards'] += 1
    for key in SUMMED:
        totals[key] += int(s.get(key) or 0)
    totals['tokens_per_s'] += float(s.get('tokens_per_s') or 0) if s.get('alive') else 0.0
    if totals['eta_s'] is None:
        return
    eta = s.get('eta_s')
    if _stopped_unfinished(s) or (eta is None and s.get('samples_done', 0) < s.get('samples_total', 0)):
        totals['eta_s'] = None
    elif eta is not None:
        totals['eta_s'] = max(totals['eta_s'], eta)


def _total_row(totals):
    return ('TOTAL', str(totals['shards']), '', str(totals['samples_done']), str(totals['samples_total']),
            _percent(totals['samples_done'], totals['samples_total']), '%.0f' % totals['tokens_per_s'],
            _duration(totals['eta_s']), '', '', str(totals['samples_failed']), str(totals['bad_lines']),
            str(totals['errors']))


def status_table(reports):
    """``reports``: ``[{host, statuses: [read_status...]}]`` -> ``{lines, totals}``.

    The whole job's ETA is the slowest shard's: they run in parallel.
    """
    rows = [HEADER]
    totals = dict(dict.fromkeys(SUMMED, 0), tokens_per_s=0.0, eta_s=0, shards=0, stalled=[])
    # the shards the statuses say the job has, and those that reported: a shard that never
    # started (or whose host was not read) has no row, and its samples are in no total
    counts, reported = set(), set()
    for report in sorted(reports, key=lambda r: r['host']):
        statuses = report.get('statuses') or []
        if report.get('error'):
            rows.append((report['host'], '-', 'unreachable: %s' % report['error'][:60]) + BLANK)
            totals['eta_s'] = None
            continue
        if not statuses:
            rows.append((report['host'], '-', 'no job') + BLANK)
        for s in statuses:
            rows.append(_shard_row(report['host'], s))
            _add_shard(totals, s)
            counts.add(s.get('shard_count'))
            reported.add(s.get('shard_index'))
            if s.get('state') == 'stalled':
                totals['stalled'].append('%s/%s' % (report['host'], s.get('shard_index', '?')))
    rows.append(_total_row(totals))
    expected = max((c for c in counts if isinstance(c, int) and c > 0), default=0)
    totals['shards_missing'] = sorted(set(range(expected)) - reported)
    lines = table_lines(rows)
    if totals['stalled']:
        lines.append('STALLED: %s made no progress while the server was healthy (README "Recovery": what it '
                     'waits on is in its STATE; its log says more)' % ', '.join(totals['stalled']))
    if totals['shards_missing']:
        lines.append('MISSING: shard(s) %s of %d report no status (never started, or its host was not read): '
                     'their samples are in no total' % (', '.join(map(str, totals['shards_missing'])), expected))
    return {'lines': lines, 'totals': totals}
