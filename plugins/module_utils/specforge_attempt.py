# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which SpecForge online attempt a run goes on with, read from SpecForge's own markers.

SpecForge 0.2.0 never resumes a producer: a fresh attempt needs fresh control and consumer-state dirs.
Its ref channel (``specforge/runtime/data_plane/streaming_ref_channel.py``) leaves sidecars beside
``<control_dir>/refs.jsonl``: ``.consumer_done`` when the consumer finished, ``.failed`` and
``.consumer_failed`` (the reason) when a role failed or was stopped (SIGTERM writes ``.failed``).
An attempt is ``<root>/<run_id>/attempt-NNNN/{control,consumer-state}``.
"""

from __future__ import annotations

import glob
import os
import re

# the options every module of a run takes (online_training_attempt, online_training_status; documented once in the
# doc fragment eagle3.extraction.online_training_run) and their one check
RUN_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,127}')
RUN_ARGUMENT_SPEC = {
    'control_root': {'type': 'path', 'required': True},
    'run_id': {'type': 'str', 'required': True},
    'output_dir': {'type': 'path', 'required': True},
}


def run_input_error(params):
    """Why the run's options cannot be used (naming the option and its value), else None."""
    for name in ('control_root', 'output_dir'):
        if not os.path.isabs(params[name]) or os.path.normpath(params[name]) == '/':
            return '%s=%r: expected an absolute path other than /' % (name, params[name])
    if not RUN_ID.fullmatch(params['run_id']):
        return 'run_id=%r: expected letters, digits, ".", "_" and "-"' % params['run_id']
    return None


CHANNEL = 'refs.jsonl'
ATTEMPT = re.compile(r'attempt-([0-9]{4,})')


def attempt_dirs(attempt_dir):
    return os.path.join(attempt_dir, 'control'), os.path.join(attempt_dir, 'consumer-state')


def attempts(run_root):
    """The run's attempt numbers, oldest first."""
    try:
        names = os.listdir(run_root)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(ATTEMPT.fullmatch, names) if m)


def _read(path):
    try:
        with open(path, encoding='utf-8') as stream:
            return stream.read().strip()
    except FileNotFoundError:
        return None


def attempt_state(control_dir):
    """finished, failed (with the reason), or open (running, or stopped without a marker).

    The consumer's own markers come first: its failure outranks its done marker, and its done marker outranks the
    producer's ``.failed``, which a producer still running after the consumer finished writes when it is stopped
    (stop.yml, a reboot: SIGTERM): the run finished all the same, and a re-run must start nothing."""
    channel = os.path.join(control_dir, CHANNEL)
    reason = _read(channel + '.consumer_failed')
    if reason is not None:
        return 'failed', reason or '.consumer_failed'
    if os.path.exists(channel + '.consumer_done'):
        return 'finished', ''
    reason = _read(channel + '.failed')
    if reason is not None:
        return 'failed', reason or '.failed'
    return 'open', ''


def latest_checkpoint(output_dir, run_id):
    """The newest ``<run_id>-step<N>`` checkpoint dir (SpecForge's CheckpointManager layout), or ''."""
    best, best_step = '', -1
    for candidate in glob.glob(os.path.join(glob.escape(output_dir), glob.escape(run_id) + '-step*')):
        match = re.fullmatch(re.escape(run_id) + r'-step([0-9]+)', os.path.basename(candidate))
        if match and os.path.isdir(candidate) and int(match.group(1)) > best_step:
            best, best_step = candidate, int(match.group(1))
    return best


def decide(run_root, output_dir, run_id, restart=False):
    """What the next start does: a dict with action (start|continue|none), attempt, its dirs, resume_from
    (the consumer's checkpoint within the attempt) and draft_checkpoint (a new attempt's starting weights)."""
    numbers = attempts(run_root)
    checkpoint = latest_checkpoint(output_dir, run_id)
    if numbers:
        current = os.path.join(run_root, 'attempt-%04d' % numbers[-1])
        state, reason = attempt_state(attempt_dirs(current)[0])
        if state == 'open':
            return _result('continue', current, numbers[-1], state, reason, resume_from=checkpoint)
        if state == 'finished' and not restart:
            return _result('none', current, numbers[-1], state, reason)
    else:
        state, reason = 'none', ''
    number = numbers[-1] + 1 if numbers else 1
    fresh = os.path.join(run_root, 'attempt-%04d' % number)
    return _result('start', fresh, number, state, reason, draft_checkpoint=checkpoint)


def _result(action, attempt_dir, number, previous, reason, resume_from='', draft_checkpoint=''):
    control, state = attempt_dirs(attempt_dir)
    return {'action': action, 'attempt': number, 'attempt_dir': attempt_dir, 'control_dir': control,
            'consumer_state_dir': state, 'previous_state': previous, 'previous_reason': reason,
            'resume_from': resume_from, 'draft_checkpoint': draft_checkpoint}
