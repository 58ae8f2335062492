# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading what the extraction job leaves on a host, and adding hosts up.

The job (role ``extraction_job``, package ``eagle3_extraction_job``) writes into each
shard's output dir: ``status.json`` (progress), ``dataset_card.json`` (provenance and
totals), ``manifest.sqlite`` (table ``samples``: sample_id, idx, path, state, tokens,
bytes, sha256) and the ``.ckpt`` files. Standard library only: this runs on the
containers with whatever Python Ansible finds there.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sqlite3
import stat
import time

from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import file_sha256
from ansible_collections.eagle3.extraction.plugins.module_utils.text_table import table_lines

SHARD_DIR_PREFIX = 'shard-'
# the job holds <shard dir>/job.lock while it runs (the job's manifest.LOCK_NAME; a test checks they agree)
JOB_LOCK = 'job.lock'
# where the repair keeps a damaged file, under a name SpecForge's loader skips (no .ckpt at the end)
DAMAGED_DIR = 'damaged'


def shard_dirs(job_dir):
    """The shard output dirs under ``<output root>/<job>``, sorted."""
    try:
        names = sorted(os.listdir(job_dir))
    except FileNotFoundError:
        return []
    return [os.path.join(job_dir, n) for n in names
            if n.startswith(SHARD_DIR_PREFIX) and os.path.isdir(os.path.join(job_dir, n))]


def _pid_runs_job(pid):
    try:
        with open('/proc/%d/cmdline' % int(pid), 'rb') as f:
            return b'eagle3_extraction_job' in f.read()
    except (OSError, ValueError, TypeError):
        return False


# what status.json may hold, and of which type (a damaged or foreign file must not break the table)
STATUS_NUMBERS = ('pid', 'shard_index', 'shard_count', 'samples_total', 'samples_done', 'samples_failed',
                  'tokens_total', 'tokens_done', 'bytes_done', 'tokens_per_s', 'eta_s', 'shm_used_bytes',
                  'shm_total_bytes', 'output_free_bytes', 'errors', 'bad_lines', 'foreign_dumps', 'started_at',
                  'updated_at')
STATUS_TEXTS = ('job', 'host', 'state', 'paused')
STATUS_MAX_BYTES = 1 << 20


def _read_regular(path, limit):
    """A regular file's text, at most ``limit`` bytes; never blocks on a FIFO or a device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOFOLLOW', 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError('not a regular file')
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError('larger than %d bytes' % limit)
    return data.decode('utf-8')


def _status_fields(raw):
    """The fields of a status.json the table reads, each of its type; raises ValueError."""
    if not isinstance(raw, dict):
        raise ValueError('not a JSON object')
    status = {}
    for key in STATUS_NUMBERS:
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError('%s is %r, not a number' % (key, value))
        status[key] = value
    for key in STATUS_TEXTS:
        if key in raw:
            status[key] = str(raw[key])
    status['last_errors'] = [str(e) for e in raw.get('last_errors') or []][:5] if isinstance(raw.get('last_errors'), list) else []
    return status


def config_output_dir(config):
    """The shard's output dir named by the job's config file at path config; None when the file
    cannot be read or names no absolute path."""
    try:
        with open(config, encoding='utf-8') as handle:
            value = json.load(handle).get('output_dir')
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and os.path.isabs(value) else None


def read_status(shard_dir, now=None):
    """One shard's status.json with ``alive`` (its process still runs) and ``age_s``."""
    now = time.time() if now is None else now
    path = os.path.join(shard_dir, 'status.json')
    try:
        status = _status_fields(json.loads(_read_regular(path, STATUS_MAX_BYTES)))
    except FileNotFoundError:
        return {'shard_dir': shard_dir, 'state': 'no status yet', 'alive': False}
    except (OSError, ValueError) as exc:
        return {'shard_dir': shard_dir, 'state': 'unreadable status.json: %s' % exc, 'alive': False}
    status['shard_dir'] = shard_dir
    status['age_s'] = round(now - float(status.get('updated_at') or 0), 1)
    status['alive'] = _pid_runs_job(status.get('pid'))
    return status


def _gib(n):
    return '%.1f' % ((n or 0) / 2.0 ** 30)


def _duration(seconds):
    if seconds is None:
        return '-'
    seconds = int(seconds)
    if seconds >= 86400:
        return '%dd%02dh' % (seconds // 86400, seconds % 86400 // 3600)
    return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


def status_table(reports):
    """``reports``: ``[{host, statuses: [read_status...]}]`` -> ``{lines, totals}``.

    The whole job's ETA is the slowest shard's: they run in parallel.
    """
    # FAILED: samples not done whose last try failed (a refused prompt, a rejected dump), from
    # the manifest; BAD LINES: the dataset's lines that are no sample (each counted by one shard,
    # so the total is the dataset's); ERRORS: every error the job logged
    header = ('HOST', 'SHARD', 'STATE', 'DONE', 'OF', '%', 'TOK/S', 'ETA', 'SHM GiB', 'OUT FREE GiB',
              'FAILED', 'BAD LINES', 'ERRORS')
    rows = [header]
    blank = ('-',) * (len(header) - 3)
    totals = {'samples_done': 0, 'samples_total': 0, 'tokens_done': 0, 'tokens_total': 0,
              'tokens_per_s': 0.0, 'samples_failed': 0, 'bad_lines': 0, 'errors': 0, 'eta_s': 0, 'shards': 0}
    # the shards the statuses say the job has, and those that reported: a shard that never
    # started (or whose host was not read) has no row, and its samples are in no total
    counts, reported = set(), set()
    for report in sorted(reports, key=lambda r: r['host']):
        statuses = report.get('statuses') or []
        if report.get('error'):
            rows.append((report['host'], '-', 'unreachable: %s' % report['error'][:60]) + blank)
            totals['eta_s'] = None
            continue
        if not statuses:
            rows.append((report['host'], '-', 'no job') + blank)
            continue
        for s in statuses:
            state = s.get('state', '?')
            if state in ('running', 'paused', 'starting', 'draining leftovers') and not s.get('alive'):
                state = 'stopped (was %s)' % state
            if s.get('paused'):
                state += ': ' + s['paused'][:40]
            done, total = s.get('samples_done', 0), s.get('samples_total', 0)
            rows.append((report['host'], '%s/%s' % (s.get('shard_index', '?'), s.get('shard_count', '?')),
                         state, str(done), str(total),
                         '%.1f' % (100.0 * done / total) if total else '-',
                         '%.0f' % (s.get('tokens_per_s') or 0), _duration(s.get('eta_s')),
                         '%s/%s' % (_gib(s.get('shm_used_bytes')), _gib(s.get('shm_total_bytes'))),
                         _gib(s.get('output_free_bytes')), str(s.get('samples_failed', 0)),
                         str(s.get('bad_lines', 0)), str(s.get('errors', 0))))
            totals['shards'] += 1
            counts.add(s.get('shard_count'))
            reported.add(s.get('shard_index'))
            for key in ('samples_done', 'samples_total', 'tokens_done', 'tokens_total', 'samples_failed', 'bad_lines',
                        'errors'):
                totals[key] += int(s.get(key) or 0)
            totals['tokens_per_s'] += float(s.get('tokens_per_s') or 0) if s.get('alive') else 0.0
            if totals['eta_s'] is not None:
                eta = s.get('eta_s')
                if eta is None and done < total:
                    totals['eta_s'] = None
                elif eta is not None:
                    totals['eta_s'] = max(totals['eta_s'], eta)
    total_pct = ('%.1f' % (100.0 * totals['samples_done'] / totals['samples_total'])
                 if totals['samples_total'] else '-')
    rows.append(('TOTAL', str(totals['shards']), '', str(totals['samples_done']), str(totals['samples_total']),
                 total_pct, '%.0f' % totals['tokens_per_s'], _duration(totals['eta_s']), '', '',
                 str(totals['samples_failed']), str(totals['bad_lines']), str(totals['errors'])))
    expected = max((c for c in counts if isinstance(c, int) and c > 0), default=0)
    totals['shards_missing'] = sorted(set(range(expected)) - reported)
    lines = table_lines(rows)
    if totals['shards_missing']:
        lines.append('MISSING: shard(s) %s of %d report no status (never started, or its host was not read): '
                     'their samples are in no total' % (', '.join(map(str, totals['shards_missing'])), expected))
    return {'lines': lines, 'totals': totals}


MISSING = 'is missing'


def file_problem(shard_dir, relpath, nbytes, sha, checksums=True):
    """What is wrong with a ``done`` row's file (its size, its sha256 with ``checksums``), or ``None``.

    The one check of a finished file: verify reports it, the repair redoes the sample."""
    path = os.path.join(shard_dir, relpath)
    try:
        size = os.path.getsize(path)
    except OSError:
        return MISSING
    if size != nbytes:
        return 'has %d bytes, the manifest %d' % (size, nbytes)
    if checksums and file_sha256(path) != sha:
        return 'does not match its sha256'
    return None


FAILURES_SHOWN = 10
# the dataset's bad lines named in verify's summary (the cards name up to as many each)
BAD_LINES_SHOWN = 10


def verify_shard(shard_dir, checksums=True):
    """Prove one shard's output: manifest == files == card. Returns a report with ``problems``."""
    problems = []
    report = {'shard_dir': shard_dir, 'ids': [], 'samples': 0, 'tokens': 0, 'bytes': 0, 'problems': problems}
    manifest = os.path.join(shard_dir, 'manifest.sqlite')
    if not os.path.isfile(manifest):
        problems.append('%s: no manifest.sqlite' % shard_dir)
        return report
    try:
        db = sqlite3.connect(manifest)
        try:
            meta = dict(db.execute('SELECT key, value FROM meta'))
            rows = list(db.execute('SELECT sample_id, path, state, tokens, bytes, sha256 FROM samples ORDER BY idx'))
            failures = list(db.execute('SELECT sample_id, attempts, reason FROM failures ORDER BY at'))
        finally:
            db.close()
    except sqlite3.Error as exc:
        problems.append('%s: cannot be read as the job\'s manifest: %s' % (manifest, exc))
        return report
    report['meta'] = meta
    listed = set()
    for sample_id, relpath, state, tokens, nbytes, sha in rows:
        path = os.path.join(shard_dir, relpath)
        listed.add(os.path.normpath(relpath))
        if state != 'done':
            problems.append('%s: %s is half-written (state %s): run the job again to redo it' % (sample_id, relpath, state))
            continue
        problem = file_problem(shard_dir, relpath, nbytes, sha, checksums)
        if problem:
            problems.append('%s: %s %s' % (sample_id, relpath, problem))
            if problem == MISSING:
                continue
        report['ids'].append(sample_id)
        report['samples'] += 1
        report['tokens'] += tokens
        report['bytes'] += nbytes
    # a sample the server refused (or whose dump was rejected) is not in the output: say why
    report['failed'] = len(failures)
    for sample_id, attempts, reason in failures[:FAILURES_SHOWN]:
        problems.append('%s: not extracted, its last try failed (%d tries): %s' % (sample_id, attempts, reason))
    if len(failures) > FAILURES_SHOWN:
        problems.append('%d more samples failed (the failures table of %s)' % (len(failures) - FAILURES_SHOWN, manifest))
    for root, dirs, files in os.walk(shard_dir):
        dirs[:] = [d for d in dirs if d != 'rejected']
        for name in files:
            rel = os.path.normpath(os.path.relpath(os.path.join(root, name), shard_dir))
            if name.endswith('.tmp'):
                problems.append('%s: a partial file' % rel)
            elif name.endswith('.ckpt') and rel not in listed:
                problems.append('%s: a .ckpt file the manifest does not list' % rel)
    try:
        card = json.loads(_read_regular(os.path.join(shard_dir, 'dataset_card.json'), STATUS_MAX_BYTES))
        if not isinstance(card, dict):
            raise ValueError('not a JSON object')
    except (OSError, ValueError) as exc:
        problems.append('%s: no readable dataset_card.json (%s)' % (shard_dir, exc))
        card = {}
    report['card'] = card
    # the dataset's lines that are no sample: not a problem of the output, but said in the summary
    bad_lines = card.get('bad_lines')
    report['bad_lines'] = bad_lines if isinstance(bad_lines, int) and not isinstance(bad_lines, bool) else 0
    shown = card.get('bad_lines_shown')
    report['bad_lines_shown'] = [str(b) for b in shown][:BAD_LINES_SHOWN] if isinstance(shown, list) else []
    if card:
        for key in ('samples', 'tokens', 'bytes'):
            if card.get(key) != report[key]:
                problems.append('dataset_card.json says %s=%s, the files hold %s' % (key, card.get(key), report[key]))
        if card.get('dataset_sha256') != meta.get('dataset_sha256'):
            problems.append('dataset_card.json and the manifest name different datasets')
        if not card.get('complete'):
            problems.append('%s: the job has not finished this shard (%s of %s samples)'
                            % (shard_dir, report['samples'], card.get('shard_samples')))
        elif card.get('shard_samples') != report['samples']:
            problems.append('%s: %s samples, the shard has %s' % (shard_dir, report['samples'], card.get('shard_samples')))
    return report


def _is_complete(shard):
    return bool((shard.get('card') or {}).get('complete')) and not shard.get('problems')


def _kept_and_leftovers(copies):
    """Copies of one shard (``[(where, shard report)]``) -> (the copy counted, leftovers).

    A shard handed to another host while its first host was away is held twice once
    that host comes back. The complete, sound copy is counted; a copy whose samples
    are all in it is a leftover of the handover, reported once and not counted. Two
    copies that disagree stay a problem.
    """
    complete = [c for c in copies if _is_complete(c[1])]
    if not complete:
        return None, []
    kept = complete[0]
    kept_ids = set(kept[1].get('ids', []))
    others = [c for c in copies if c is not kept]
    if all(set(c[1].get('ids', [])) <= kept_ids for c in others):
        return kept, others
    return None, []


def verify_union(host_reports):
    """Every sample exactly once across all hosts' shards; every shard present once; one dataset.

    Returns ``{totals, problems, notes}``: a leftover copy of a handed-over shard is a
    note (one line per copy), not a problem, and its samples are not counted twice.
    """
    problems = []
    notes = []
    owner = {}
    copies = {}
    datasets = set()
    counts = set()
    totals = {'samples': 0, 'tokens': 0, 'bytes': 0, 'files_checked': 0, 'bad_lines': 0}
    bad_lines_shown = []
    for host in sorted(host_reports, key=lambda r: r['host']):
        for shard in host.get('shards', []):
            meta = shard.get('meta') or {}
            datasets.add(meta.get('dataset_sha256'))
            counts.add(meta.get('shard_count'))
            copies.setdefault(meta.get('shard_index'), []).append(
                ('%s:%s' % (host['host'], shard['shard_dir']), shard, host['host']))
    for index in sorted(copies, key=str):
        held = [(where, shard) for where, shard, _host in copies[index]]
        counted = held
        if len(held) > 1:
            kept, leftovers = _kept_and_leftovers(held)
            if kept is None:
                problems.append('shard %s is in %d places that disagree: %s'
                                % (index, len(held), ', '.join(w for w, _s in held)))
            else:
                counted = [kept]
                notes.extend('%s is a leftover copy of shard %s (%d samples, all also in %s): not counted; '
                             'remove it once it is no longer needed' % (w, index, s.get('samples', 0), kept[0])
                             for w, s in leftovers)
        for where, shard in counted:
            host = where.split(':', 1)[0]
            problems.extend('%s: %s' % (host, p) for p in shard.get('problems', []))
            card = shard.get('card') or {}
            for sample_id in shard.get('ids', []):
                if sample_id in owner:
                    problems.append('%s is stored twice: %s and %s' % (sample_id, owner[sample_id], where))
                else:
                    owner[sample_id] = where
            for key in ('samples', 'tokens', 'bytes'):
                totals[key] += shard.get(key, 0)
            totals['files_checked'] += shard.get('samples', 0)
            totals['bad_lines'] += shard.get('bad_lines', 0)
            bad_lines_shown.extend(shard.get('bad_lines_shown', []))
            totals.setdefault('dataset_samples', card.get('dataset_samples'))
    if len(datasets) > 1:
        problems.append('the shards were made from different datasets: %s' % sorted(str(d) for d in datasets))
    if len(counts) > 1:
        problems.append('the shards disagree on the shard count: %s' % sorted(str(c) for c in counts))
    elif counts:
        count = int(counts.pop() or 0)
        missing = sorted(set(str(i) for i in range(count)) - set(str(k) for k in copies))
        if missing:
            problems.append('no host holds shard(s) %s of %d' % (', '.join(missing), count))
    else:
        problems.append('no shard output found on any host')
    totals['unique_samples'] = len(owner)
    if totals['bad_lines']:
        notes.append(bad_lines_note(totals['bad_lines'], bad_lines_shown))
    return {'totals': totals, 'problems': problems, 'notes': notes}


def bad_lines_note(count, shown):
    """The summary's note on the dataset's lines that are no sample: how many, the first ones."""
    shown = list(shown)[:BAD_LINES_SHOWN]
    note = '%d bad line%s of the dataset %s not extracted: %s' % (
        count, '' if count == 1 else 's', 'was' if count == 1 else 'were', '; '.join(shown))
    if count > len(shown):
        note += '; %d more (each shard\'s dataset_card.json and log name its own)' % (count - len(shown))
    return note


def verified_message(union):
    """The line verify.yml prints for a verify_union() result without problems: the totals, then each note."""
    totals = union['totals']
    line = 'verified: %d samples exactly once, %d tokens, %d bytes' % (
        totals['unique_samples'], totals['tokens'], totals['bytes'])
    return '; '.join([line] + list(union['notes']))


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_aside(shard_dir, relpath, reason, now=None):
    """Move a damaged file to ``<shard>/damaged/<name>.<time>`` with its reason beside it.

    Never deleted, never lost: the new name is linked and fsync'ed before the old one is
    removed, then the old dir is fsync'ed. Its new name does not end in ``.ckpt``, so
    SpecForge's loader does not read it. Returns the new path."""
    src = os.path.join(shard_dir, relpath)
    aside = os.path.join(shard_dir, DAMAGED_DIR)
    if not os.path.isdir(aside):
        os.mkdir(aside, 0o755)
        _fsync_dir(shard_dir)
    base = os.path.join(aside, '%s.%s' % (os.path.basename(relpath),
                                          time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))))
    target, n = base, 0
    while True:
        try:
            os.link(src, target)   # never replaces: a name taken gets a number
            break
        except FileExistsError:
            n += 1
            target = '%s.%d' % (base, n)
    tmp = os.path.join(aside, '.%s.reason.tmp' % os.path.basename(target))
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write('%s: %s\n' % (relpath, reason))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target + '.reason')
    _fsync_dir(aside)
    os.unlink(src)
    _fsync_dir(os.path.dirname(src))
    return target


def _hold_job_lock(shard_dir, check_mode):
    """The shard's job lock, held (an fd), or ``None`` when no job ever ran here (check mode
    creates nothing). Raises BlockingIOError while the job runs."""
    path = os.path.join(shard_dir, JOB_LOCK)
    if check_mode and not os.path.exists(path):
        return None
    flags = os.O_RDONLY if check_mode else os.O_RDWR | os.O_CREAT
    fd = os.open(path, flags | getattr(os, 'O_NOFOLLOW', 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def repair_shard(shard_dir, checksums=True, check_mode=False):
    """Make the job redo what verify finds damaged or missing in one shard dir.

    A ``done`` row whose file is missing, of the wrong size or (``checksums``) sha256 is a
    sample to redo: a damaged file is moved aside (:func:`move_aside`), so that the job's
    next start finds the row without its file and extracts the sample again; the manifest
    is the job's and is not written here. Done under the job's lock: a shard whose job runs
    is left alone (``busy``). ``start``: the shard's unit should be started (samples to redo,
    half-written rows, or the shard not finished)."""
    report = {'shard_dir': shard_dir, 'shard_index': None, 'busy': False, 'redo': [], 'moved': [],
              'start': False, 'problems': []}
    manifest = os.path.join(shard_dir, 'manifest.sqlite')
    if not os.path.isfile(manifest):
        report['problems'].append('%s: no manifest.sqlite, nothing to redo here (extract.yml starts a shard)'
                                  % shard_dir)
        return report
    try:
        lock = _hold_job_lock(shard_dir, check_mode)
    except BlockingIOError:
        report['busy'] = True
        return report
    try:
        try:
            db = sqlite3.connect(manifest)
            try:
                meta = dict(db.execute('SELECT key, value FROM meta'))
                rows = list(db.execute("SELECT sample_id, path, bytes, sha256 FROM samples WHERE state = 'done' "
                                       "ORDER BY idx"))
                writing = db.execute("SELECT COUNT(*) FROM samples WHERE state != 'done'").fetchone()[0]
            finally:
                db.close()
        except sqlite3.Error as exc:
            report['problems'].append('%s: cannot be read as the job\'s manifest: %s' % (manifest, exc))
            return report
        index = meta.get('shard_index')
        report['shard_index'] = int(index) if str(index).isdigit() else None
        for sample_id, relpath, nbytes, sha in rows:
            problem = file_problem(shard_dir, relpath, nbytes, sha, checksums)
            if problem is None:
                continue
            report['redo'].append({'sample_id': sample_id, 'path': relpath, 'problem': problem})
            if problem != MISSING and not check_mode:
                report['moved'].append(move_aside(shard_dir, relpath, problem))
        try:
            card = json.loads(_read_regular(os.path.join(shard_dir, 'dataset_card.json'), STATUS_MAX_BYTES))
        except (OSError, ValueError):
            card = {}
        finished = isinstance(card, dict) and bool(card.get('complete'))
        report['start'] = bool(report['redo']) or writing > 0 or not finished
    finally:
        if lock is not None:
            os.close(lock)
    if report['start'] and report['shard_index'] is None:
        report['problems'].append('%s: its manifest names no shard index: start its unit yourself' % shard_dir)
    return report


def repair_lines(shards):
    """What a repair found and did, one line a shard and one a sample (for the playbook's output)."""
    lines = []
    for shard in shards:
        where = shard['shard_dir']
        if shard['busy']:
            lines.append('%s: its job is running (it holds %s): nothing moved; run the repair again once it has '
                         'stopped' % (where, JOB_LOCK))
            continue
        lines.extend(shard['problems'])
        if shard['redo']:
            lines.append('%s: %d sample%s to redo' % (where, len(shard['redo']), '' if len(shard['redo']) == 1 else 's'))
        moved = iter(shard['moved'])
        for item in shard['redo']:
            line = '%s: %s %s' % (item['sample_id'], item['path'], item['problem'])
            if item['problem'] != MISSING:
                line += ': moved to %s' % next(moved, '<shard>/%s (check mode: not moved)' % DAMAGED_DIR)
            lines.append(line)
        if shard['start'] and not shard['redo']:
            lines.append('%s: not finished: its unit is started to go on' % where)
    return lines or ['nothing to redo: every finished file is there, whole']
