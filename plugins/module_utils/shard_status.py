# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One shard's progress as its job writes it (``status.json``), and whether that job still runs.

Read by extraction_status on the containers, and by converged_state and extraction_job_outcome,
which go by a shard's state. Standard library only.
"""

from __future__ import annotations

import math
import os
import time

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import STATUS, read_json

# what status.json may hold, and of which type (a damaged or foreign file must not break the table)
STATUS_NUMBERS = ('pid', 'shard_index', 'shard_count', 'samples_total', 'samples_done', 'samples_failed',
                  'tokens_total', 'tokens_done', 'bytes_done', 'tokens_per_s', 'eta_s', 'shm_used_bytes',
                  'shm_total_bytes', 'output_free_bytes', 'errors', 'answered', 'bad_lines', 'foreign_dumps',
                  'started_at', 'updated_at', 'stall_restarts', 'stall_restarts_total', 'stall_restarts_max',
                  'stalled_for_s')
# stalled: what a stalled shard waits on (the job's stall watchdog, eagle3_extraction_job/stall.py)
STATUS_TEXTS = ('job', 'host', 'state', 'paused', 'stalled')
# true or false, nothing else
STATUS_FLAGS = ('stall_final',)
# the job's last errors a status keeps
LAST_ERRORS = 5


def _pid_runs_job(pid):
    try:
        with open('/proc/%d/cmdline' % int(pid), 'rb') as f:
            return b'eagle3_extraction_job' in f.read()
    except (OSError, ValueError, TypeError):
        return False


def _number(key, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError('%s is %r, not a number' % (key, value))
    return value


def status_fields(raw):
    """The fields of a status.json the table reads, each of its type; raises ValueError."""
    if not isinstance(raw, dict):
        raise ValueError('not a JSON object')
    status = dict((key, _number(key, raw[key])) for key in STATUS_NUMBERS if raw.get(key) is not None)
    status.update((key, str(raw[key])) for key in STATUS_TEXTS if key in raw)
    status.update((key, raw[key] is True) for key in STATUS_FLAGS if key in raw)
    errors = raw.get('last_errors')
    status['last_errors'] = [str(e) for e in errors or []][:LAST_ERRORS] if isinstance(errors, list) else []
    return status


def read_status(shard_dir, now=None):
    """One shard's status.json with ``alive`` (its process still runs) and ``age_s``."""
    now = time.time() if now is None else now
    try:
        status = status_fields(read_json(os.path.join(shard_dir, STATUS)))
    except FileNotFoundError:
        return {'shard_dir': shard_dir, 'state': 'no status yet', 'alive': False}
    except (OSError, ValueError) as exc:
        return {'shard_dir': shard_dir, 'state': 'unreadable status.json: %s' % exc, 'alive': False}
    status['shard_dir'] = shard_dir
    status['age_s'] = round(now - float(status.get('updated_at') or 0), 1)
    status['alive'] = _pid_runs_job(status.get('pid'))
    return status
