# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proving one shard's output on its host: manifest == files == card (extraction_verify with job_dir).
verify_union adds the hosts' reports up on the controller."""

from __future__ import annotations

import os
import re
import sqlite3

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import (
    MANIFEST, MISSING, file_problem, read_card, read_manifest)

FAILURES_SHOWN = 10
# a sample id (the job's names.SAMPLE_ID_RE; a unit test holds them equal): what extraction_job_accept_failed names
SAMPLE_ID = re.compile(r'[A-Za-z0-9_][A-Za-z0-9._-]{0,127}')
ACCEPT_FAILED_WHAT = 'a list of sample ids, each named whole (%s): no pattern, no wildcard' % SAMPLE_ID.pattern
# the dataset's bad lines named in verify's summary (the cards name up to as many each)
BAD_LINES_SHOWN = 10
META = 'SELECT key, value FROM meta'
SAMPLES = 'SELECT sample_id, path, state, tokens, bytes, sha256 FROM samples ORDER BY idx'
FAILURES = 'SELECT sample_id, attempts, reason, line FROM failures ORDER BY at'
# a manifest whose job has not run since failures had the sample's dataset line (the job adds it)
FAILURES_WITHOUT_LINE = 'SELECT sample_id, attempts, reason, NULL FROM failures ORDER BY at'
FAILURES_COLUMNS = 'PRAGMA table_info(failures)'
# the way on from a finished sample whose file is damaged or missing (extraction_repair)
REPAIR = {True: 'run playbooks/repair.yml: it extracts the sample again',
          False: 'run playbooks/repair.yml: it moves the file aside and extracts the sample again'}


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _damaged_row(sample_id, relpath, state, tokens, nbytes, sha):
    """What of a row no sound manifest holds (a NULL token count in a ``done`` row...), or None."""
    if not isinstance(sample_id, str) or not isinstance(relpath, str) or not relpath:
        return 'sample_id=%r path=%r' % (sample_id, relpath)
    if state == 'done':
        for name, value, sound in (('tokens', tokens, _whole), ('bytes', nbytes, _whole),
                                   ('sha256', sha, lambda v: isinstance(v, str) and len(v) == 64)):
            if not sound(value):
                return '%s=%s' % (name, 'NULL' if value is None else repr(value))
    return None


def _count_done_files(report, shard_dir, rows, checksums, manifest):
    """Count each ``done`` row whose file is sound into the report, and name every other; returns the
    paths the manifest lists."""
    listed = set()
    for sample_id, relpath, state, tokens, nbytes, sha in rows:
        damaged = _damaged_row(sample_id, relpath, state, tokens, nbytes, sha)
        if damaged:
            report['problems'].append('%s: the row of sample %r holds %s, which no sound manifest does (a damaged '
                                      'manifest): that sample is not counted as extracted' % (manifest, sample_id,
                                                                                              damaged))
            if isinstance(relpath, str) and relpath:
                listed.add(os.path.normpath(relpath))
            continue
        listed.add(os.path.normpath(relpath))
        if state != 'done':
            report['problems'].append('%s: %s is half-written (state %s): run the job again to redo it'
                                      % (sample_id, relpath, state))
            continue
        problem = file_problem(shard_dir, relpath, nbytes, sha, checksums)
        if problem:
            report['problems'].append('%s: %s %s: %s' % (sample_id, relpath, problem, REPAIR[problem == MISSING]))
            if problem == MISSING:
                continue
        report['ids'].append(sample_id)
        report['samples'] += 1
        report['tokens'] += tokens
        report['bytes'] += nbytes
    return listed


def _named(sample_id, line):
    """A failed sample as verify names it: its id and, where the manifest has it, its line in the dataset."""
    return sample_id if line is None else '%s (line %s)' % (sample_id, line)


def _failure_problems(failures, manifest):
    """A sample the server refused (or whose dump was rejected) is not in the output: say why."""
    problems = ['%s: not extracted, its last try failed (%s tries): %s' % (_named(sample_id, line), attempts, reason)
                for sample_id, attempts, reason, line in failures[:FAILURES_SHOWN]]
    if len(failures) > FAILURES_SHOWN:
        problems.append('%d more samples failed (the failures table of %s)' % (len(failures) - FAILURES_SHOWN, manifest))
    return problems


def _stray_files(shard_dir, listed):
    """The partial files, and the .ckpt files the manifest does not list (the rejected dumps aside)."""
    problems = []
    for root, dirs, files in os.walk(shard_dir):
        dirs[:] = [d for d in dirs if d != 'rejected']
        for name in files:
            rel = os.path.normpath(os.path.relpath(os.path.join(root, name), shard_dir))
            if name.endswith('.tmp'):
                problems.append('%s: a partial file' % rel)
            elif name.endswith('.ckpt') and rel not in listed:
                problems.append('%s: a .ckpt file the manifest does not list' % rel)
    return problems


def _card_problems(card, report, meta, shard_dir):
    """Where the dataset card and the files or the manifest disagree, or the shard is not finished. A shard whose
    only missing samples are failures the user accepts is finished (its job ends complete once it is given them:
    before, its card says incomplete)."""
    problems = ['dataset_card.json says %s=%s, the files hold %s' % (key, card.get(key), report[key])
                for key in ('samples', 'tokens', 'bytes') if card.get(key) != report[key]]
    if card.get('dataset_sha256') != meta.get('dataset_sha256'):
        problems.append('dataset_card.json and the manifest name different datasets')
    accepted = len(report['accepted'])
    if card.get('shard_samples') == report['samples'] + accepted and accepted:
        return problems
    if not card.get('complete'):
        problems.append('%s: the job has not finished this shard (%s of %s samples)'
                        % (shard_dir, report['samples'], card.get('shard_samples')))
    elif card.get('shard_samples') != report['samples']:
        problems.append('%s: %s samples, the shard has %s' % (shard_dir, report['samples'], card.get('shard_samples')))
    return problems


def _read_card(report, shard_dir, meta):
    """The card into the report, with the dataset's bad lines it counts and names, and what it disagrees on."""
    try:
        card = read_card(shard_dir)
    except (OSError, ValueError) as exc:
        report['problems'].append('%s: no readable dataset_card.json (%s)' % (shard_dir, exc))
        card = {}
    report['card'] = card
    # the dataset's lines that are no sample: not a problem of the output, but said in the summary
    bad_lines = card.get('bad_lines')
    report['bad_lines'] = bad_lines if isinstance(bad_lines, int) and not isinstance(bad_lines, bool) else 0
    shown = card.get('bad_lines_shown')
    report['bad_lines_shown'] = [str(b) for b in shown][:BAD_LINES_SHOWN] if isinstance(shown, list) else []
    if card:
        report['problems'].extend(_card_problems(card, report, meta, shard_dir))


def accept_failed_error(value):
    """Why ``value`` is no extraction_job_accept_failed, or None: a list of distinct sample ids, each whole. A
    selection that could match every failure (``*``, ``all``, a pattern) is refused: each is named by its id."""
    if not isinstance(value, (list, tuple)):
        return 'not a list'
    seen = set()
    for item in value:
        if not isinstance(item, str) or not SAMPLE_ID.fullmatch(item):
            return 'refused at %r (not a sample id: each accepted sample is named by its id, no pattern)' % (item,)
        if item in seen:
            return 'refused at %r (given twice)' % item
        seen.add(item)
    return None


def _accepted(failures, accept_failed):
    """The failures the user accepts as not extracted (``accept_failed``), each named with its line and reason, and
    the others."""
    accept = set(accept_failed)
    taken = [row for row in failures if row[0] in accept]
    return (['%s: %s' % (_named(sample_id, line), reason) for sample_id, _attempts, reason, line in taken],
            [row for row in failures if row[0] not in accept])


def verify_shard(shard_dir, checksums=True, accept_failed=()):
    """Prove one shard's output: manifest == files == card. Returns a report with ``problems``.

    ``accept_failed``: sample ids the user accepts as not extracted (extraction_job_accept_failed): such a failure is
    no problem but is named in ``accepted`` (``<id> (line <n>): <reason>``), and ``failed_ids`` lists every failure
    (the controller refuses an accepted id that failed on no shard)."""
    problems = []
    report = {'shard_dir': shard_dir, 'ids': [], 'samples': 0, 'tokens': 0, 'bytes': 0, 'problems': problems,
              'accepted': [], 'failed_ids': []}
    manifest = os.path.join(shard_dir, MANIFEST)
    if not os.path.isfile(manifest):
        problems.append('%s: no manifest.sqlite' % shard_dir)
        return report
    try:
        meta, rows, columns = read_manifest(manifest, META, SAMPLES, FAILURES_COLUMNS)
        with_line = any(column[1] == 'line' for column in columns)
        (failures,) = read_manifest(manifest, FAILURES if with_line else FAILURES_WITHOUT_LINE)
    except sqlite3.Error as exc:
        problems.append('%s: cannot be read as the job\'s manifest: %s' % (manifest, exc))
        return report
    meta = report['meta'] = dict(meta)
    listed = _count_done_files(report, shard_dir, rows, checksums, manifest)
    report['failed'] = len(failures)
    report['failed_ids'] = [row[0] for row in failures]
    report['accepted'], failures = _accepted(failures, accept_failed)
    problems.extend(_failure_problems(failures, manifest))
    problems.extend(_stray_files(shard_dir, listed))
    _read_card(report, shard_dir, meta)
    return report
