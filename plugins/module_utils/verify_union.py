# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adding the hosts' verify reports (shard_verify.verify_shard) up on the controller (the filter
extraction_verify_union): every sample exactly once across all hosts' shards, every shard present
once, one dataset; and the line verify.yml prints."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import BAD_LINES_SHOWN

# the problems named in verify's one line (every one is in the result's problems)
PROBLEMS_SHOWN = 20
# the accepted failures named in verify's summary
ACCEPTED_SHOWN = 10


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


def _copies(host_reports):
    """``{shard index: [(host:shard dir, shard report)]}``, the datasets and the shard counts the manifests name."""
    copies, datasets, counts = {}, set(), set()
    for host in sorted(host_reports, key=lambda r: r['host']):
        for shard in host.get('shards', []):
            meta = shard.get('meta') or {}
            datasets.add(meta.get('dataset_sha256'))
            counts.add(meta.get('shard_count'))
            copies.setdefault(meta.get('shard_index'), []).append(('%s:%s' % (host['host'], shard['shard_dir']), shard))
    return copies, datasets, counts


def _counted(index, held, problems, notes):
    """The copies of one shard that count: all when it is held once, else the complete one (the others are
    leftovers, a note each) or all of them when they disagree (a problem)."""
    if len(held) < 2:
        return held
    kept, leftovers = _kept_and_leftovers(held)
    if kept is None:
        problems.append('shard %s is in %d places that disagree: %s' % (index, len(held), ', '.join(w for w, _s in held)))
        return held
    notes.extend('%s is a leftover copy of shard %s (%d samples, all also in %s): not counted; '
                 'remove it once it is no longer needed' % (w, index, s.get('samples', 0), kept[0])
                 for w, s in leftovers)
    return [kept]


def _accepted_problems(host_reports, counted):
    """An accepted id (extraction_job_accept_failed) that failed on no counted shard: extracted, or no such sample.
    Accepting it would hide nothing today and a real failure tomorrow: it is named, to be removed."""
    accept = set()
    for host in host_reports:
        accept.update(host.get('accept_failed') or [])
    failed = set()
    for shard in counted:
        failed.update(shard.get('failed_ids') or [])
    return ['extraction_job_accept_failed names %s, which did not fail on any shard (extracted, or no such sample): '
            'remove it' % sample_id for sample_id in sorted(accept - failed)]


def _count(union, where, shard, owner):
    """Add one counted copy to the union: its problems, its samples (each exactly once), its totals."""
    totals = union['totals']
    host = where.split(':', 1)[0]
    union['problems'].extend('%s: %s' % (host, p) for p in shard.get('problems', []))
    for sample_id in shard.get('ids', []):
        if sample_id in owner:
            union['problems'].append('%s is stored twice: %s and %s' % (sample_id, owner[sample_id], where))
        else:
            owner[sample_id] = where
    for key in ('samples', 'tokens', 'bytes'):
        totals[key] += shard.get(key, 0)
    totals['files_checked'] += shard.get('samples', 0)
    totals['bad_lines'] += shard.get('bad_lines', 0)
    union['accepted'].extend(shard.get('accepted', []))
    union['bad_lines_shown'].extend(shard.get('bad_lines_shown', []))
    totals.setdefault('dataset_samples', (shard.get('card') or {}).get('dataset_samples'))


def _whole_job_problems(copies, datasets, counts):
    """One dataset, one shard count, and every shard of it held somewhere."""
    problems = []
    if len(datasets) > 1:
        problems.append('the shards were made from different datasets: %s' % sorted(str(d) for d in datasets))
    if len(counts) > 1:
        problems.append('the shards disagree on the shard count: %s' % sorted(str(c) for c in counts))
    elif not counts:
        problems.append('no shard output found on any host')
    else:
        count = int(next(iter(counts)) or 0)
        missing = sorted(set(str(i) for i in range(count)) - set(str(k) for k in copies))
        if missing:
            problems.append('no host holds shard(s) %s of %d' % (', '.join(missing), count))
    return problems


def verify_union(host_reports):
    """Every sample exactly once across all hosts' shards; every shard present once; one dataset.

    Returns ``{totals, problems, notes}``: a leftover copy of a handed-over shard is a
    note (one line per copy), not a problem, and its samples are not counted twice.
    """
    union = {'totals': {'samples': 0, 'tokens': 0, 'bytes': 0, 'files_checked': 0, 'bad_lines': 0},
             'problems': [], 'notes': [], 'bad_lines_shown': [], 'accepted': []}
    owner = {}
    counted = []
    copies, datasets, counts = _copies(host_reports)
    for index in sorted(copies, key=str):
        for where, shard in _counted(index, copies[index], union['problems'], union['notes']):
            _count(union, where, shard, owner)
            counted.append(shard)
    union['problems'].extend(_whole_job_problems(copies, datasets, counts))
    union['problems'].extend(_accepted_problems(host_reports, counted))
    totals = union['totals']
    totals['unique_samples'] = len(owner)
    totals['accepted_failed'] = len(union['accepted'])
    if union['accepted']:
        union['notes'].append(accepted_note(union['accepted']))
    if totals['bad_lines']:
        union['notes'].append(bad_lines_note(totals['bad_lines'], union['bad_lines_shown']))
    return {'totals': totals, 'problems': union['problems'], 'notes': union['notes']}


def accepted_note(accepted):
    """The summary's note on the failed samples the user accepts as not extracted: how many, each by id and line."""
    note = '%d failed sample%s accepted as not extracted (extraction_job_accept_failed): %s' % (
        len(accepted), '' if len(accepted) == 1 else 's', '; '.join(accepted[:ACCEPTED_SHOWN]))
    if len(accepted) > ACCEPTED_SHOWN:
        note += '; %d more (each shard\'s manifest failures)' % (len(accepted) - ACCEPTED_SHOWN)
    return note


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


def union_message(union):
    """verify.yml's one line for a verify_union() result: the totals and the notes, or how many problems
    there are and the first of them."""
    problems = union['problems']
    if problems:
        return '%d problem(s): %s' % (len(problems), '; '.join(problems[:PROBLEMS_SHOWN]))
    return verified_message(union)
