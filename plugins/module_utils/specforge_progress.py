# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The trainer's progress as SpecForge 0.2.0's consumer prints it, and the ref channel's counters.

With ``tracking.report_to: none`` the consumer prints, every ``training.log_interval`` optimizer steps,
``step N: {'loss': 1.2, 'lr': 1e-4, 'perf/global_samples_per_second': 3.1, ...}`` (a Python dict literal,
``specforge/training/assembly.py``, ``_logger``). The producer counts published refs as lines of
``<control_dir>/refs.jsonl``; the consumer writes its consumed count to ``refs.jsonl.consumed_count``.
"""

from __future__ import annotations

import ast
import os
import re

STEP_LINE = re.compile(r'(?:\[rank0\]:\s*)?step ([0-9]+): (\{.*\})\s*')
TAIL_BYTES = 256 * 1024


def last_step(log_path):
    """{step, loss, lr, samples_per_s} of the log's last step line, or {} (no log, no step yet)."""
    try:
        with open(log_path, 'rb') as stream:
            stream.seek(max(0, os.fstat(stream.fileno()).st_size - TAIL_BYTES))
            lines = stream.read().decode('utf-8', 'replace').splitlines()
    except FileNotFoundError:
        return {}
    for line in reversed(lines):
        match = STEP_LINE.fullmatch(line.strip())
        if not match:
            continue
        try:
            metrics = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            continue
        if isinstance(metrics, dict):
            return {'step': int(match.group(1)), 'loss': _number(metrics.get('loss')),
                    'lr': _number(metrics.get('lr')),
                    'samples_per_s': _number(metrics.get('perf/global_samples_per_second'))}
    return {}


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def channel_counts(control_dir):
    """{published, consumed}: refs the producer published and the consumer reported consumed."""
    channel = os.path.join(control_dir, 'refs.jsonl')
    published = 0
    try:
        with open(channel, 'rb') as stream:
            published = sum(1 for line in stream if line.endswith(b'\n') and line.strip())
    except FileNotFoundError:
        pass
    try:
        with open(channel + '.consumed_count', encoding='utf-8') as stream:
            consumed = int(stream.read() or '0')
    except (FileNotFoundError, ValueError):
        consumed = 0
    return {'published': published, 'consumed': consumed}


# each attempt's units log to <attempt_dir>/<role>.log (the role's units append there)
LOGS = {'producer': 'producer.log', 'consumer': 'consumer.log'}


def reader_progress(output_dir, run_id, attempt):
    """The reader's ``<output_dir>/<run_id>-reader/attempt-NNNN/progress.json`` of one attempt ({state, consumed,
    samples_per_s, starts, ...}), or {}."""
    import json  # pylint: disable=import-outside-toplevel
    path = os.path.join(output_dir, run_id + '-reader', 'attempt-%04d' % attempt, 'progress.json')
    try:
        with open(path, encoding='utf-8') as stream:
            found = json.load(stream)
    except (FileNotFoundError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
