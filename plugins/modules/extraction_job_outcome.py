#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_job_outcome
short_description: Wait until each shard of the extraction job is past its start, and fail naming a refusal
version_added: 0.1.0
description:
  - After the role C(extraction_job) (re)started the shard units, waits until each shard's job is past its start
    - sending (its C(status.json), written by this start's process, says C(running) and that the server answered
    one of its requests), paused (its reason, such as the output disk full or C(/dev/shm) above its watermark), complete,
    or its unit ended - for at most O(timeout) seconds. A job that says C(running) has not shown that it can
    send (a wrong API key, or samples the server refuses again, end it seconds later).
  - A shard whose job refused to start (not enough space, an output dir of another dataset, a bad config - exit 2,
    which systemd does not restart) or failed fails the task, naming the unit, the job's own reason (its
    C(status.json)'s last error, else the last line of its log) and the fix, so that C(extract.yml) shows it in its
    table instead of C(applied).
  - A shard whose job's stall watchdog stopped it is named with what it waited on - C(stalled) when the job
    restarts itself, C(stalled for good) (exit 4, which fails the task) when its restarts are spent.
  - A shard still starting when the time is up (no answer from the server yet), or restarting after an incomplete
    run, passes (RV(shards) says C(starting)).
  - Reads only; never changes anything.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  units:
    description:
      - Each shard's unit, in the order of O(configs) (C(extraction_job_deployed.units)).
    type: list
    elements: str
    required: true
  configs:
    description:
      - Each shard's config, whose C(output_dir) holds its C(status.json) (C(extraction_job_deployed.configs)).
    type: list
    elements: path
    required: true
  log_dir:
    description:
      - The job's log dir (C(extraction_job_log_dir)); a shard's log is C(<log_dir>/<instance>.log), the unit's
        instance (C(%i)).
    type: path
    required: true
  timeout:
    description:
      - Seconds to wait for every shard, at most.
    type: int
    default: 60
extends_documentation_fragment:
  - eagle3.extraction.attributes
'''

EXAMPLES = r'''
- name: Name a shard whose job refused to start
  eagle3.extraction.extraction_job_outcome:
    units: "{{ extraction_job_deployed.units }}"
    configs: "{{ extraction_job_deployed.configs }}"
    log_dir: /var/log/eagle3-extraction
'''

RETURN = r'''
shards:
  description: Each shard's unit, its shard (C(shard-<index>)), outcome (C(sending), C(paused), C(complete),
    C(starting), C(stalled), C(stalled for good), C(refused), C(failed)) and why (C(error)) - the pause's reason,
    what a stalled job waited on, or the job's own reason for a refusal or a failure.
  returned: always
  type: list
  elements: dict
  sample: [{unit: eagle3-extraction-job@demo-shard-0.service, shard: shard-0, outcome: sending, error: ""}]
'''

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import log_tail, unit_properties, unit_running
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import config_output_dir
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_status import read_status

# the job's exit status when it refuses (eagle3_extraction_job.job.EXIT_REFUSED): systemd does not restart it
EXIT_REFUSED = '2'
# the job's exit status when its stall watchdog stopped it for good (eagle3_extraction_job.job.EXIT_STALLED)
EXIT_STALLED = '4'
PROPERTIES = ('ActiveState', 'MainPID', 'ExecMainStatus')


def _instance(unit):
    return unit.partition('@')[2].rpartition('.')[0]


def _shard(unit):
    """``shard-<index>`` of a unit whose instance is ``<job name>-shard-<index>``."""
    instance = _instance(unit)
    return 'shard-' + instance.rpartition('-shard-')[2] if '-shard-' in instance else instance


def _stalled(status):
    """A shard the job's stall watchdog stopped: what it waited on, and whether the job restarts itself (exit 3,
    ``stalled``) or has stopped for good (exit 4, ``stalled for good``: it fails the task)."""
    waited = status.get('stalled') or 'no progress'
    if status.get('stall_final'):
        return 'stalled for good', '%s; stopped after %d restarts (README "Recovery")' % (
            waited, status.get('stall_restarts') or 0)
    return 'stalled', '%s; the job restarts (restart %d of %d)' % (
        waited, (status.get('stall_restarts') or 0) + 1, status.get('stall_restarts_max') or 0)


def outcome(unit, config, log_dir):
    """``(outcome, why)`` of one shard now; outcome None while it is still starting."""
    props = unit_properties(unit, PROPERTIES)
    output_dir = config_output_dir(config)
    status = read_status(output_dir) if output_dir else {}
    errors = status.get('last_errors') or []
    if unit_running(props['ActiveState']):
        mine = str(status.get('pid', '')) == props['MainPID'] and props['MainPID'] not in ('', '0')
        if not mine:
            return None, ''
        if status.get('state') == 'paused':
            return 'paused', status.get('paused', '')
        # running is not yet sending: the server's first answer is (a wrong key, a sample refused again end it)
        if status.get('state') == 'running' and status.get('answered', 0) > 0:
            return 'sending', ''
        if status.get('state') == 'complete':
            return 'complete', ''
        if status.get('state') == 'stalled':
            return _stalled(status)
        return None, ''
    state = status.get('state')
    if state == 'complete':
        return 'complete', ''
    if state == 'stalled' and (status.get('stall_final') or props['ExecMainStatus'] == EXIT_STALLED):
        return _stalled(status)
    if state in ('refused', 'failed') or props['ExecMainStatus'] == EXIT_REFUSED:
        why = errors[-1] if errors else ''
        if not why:
            tail = [line for line in log_tail(os.path.join(log_dir, _instance(unit) + '.log'), count=5) if line.strip()]
            why = tail[-1] if tail else 'see %s' % os.path.join(log_dir, _instance(unit) + '.log')
        return ('failed' if state == 'failed' else 'refused'), why
    return None, ''


def main():
    module = AnsibleModule(
        argument_spec=dict(
            units=dict(type='list', elements='str', required=True),
            configs=dict(type='list', elements='path', required=True),
            log_dir=dict(type='path', required=True),
            timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if len(params['units']) != len(params['configs']):
        module.fail_json(msg='units and configs are one per shard, in the same order (%d and %d given)'
                         % (len(params['units']), len(params['configs'])))
    if params['timeout'] < 0:
        module.fail_json(msg='timeout=%r: expected 0 or more seconds' % params['timeout'])
    pending = list(zip(params['units'], params['configs']))
    found = {}
    deadline = time.monotonic() + params['timeout']
    while True:
        for unit, config in list(pending):
            result, why = outcome(unit, config, params['log_dir'])
            if result is not None:
                found[unit] = (result, why)
                pending.remove((unit, config))
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(1)
    shards = [dict(unit=unit, shard=_shard(unit), outcome=found.get(unit, ('starting', ''))[0],
                   error=found.get(unit, ('', ''))[1]) for unit in params['units']]
    bad = [shard for shard in shards if shard['outcome'] in ('refused', 'failed', 'stalled for good')]
    if bad:
        module.fail_json(msg='%s. Fix the cause, then run extract.yml again: it starts the shard again.' % '; '.join(
            '%s %s: %s' % (shard['unit'], shard['outcome'], shard['error']) for shard in bad), changed=False,
            shards=shards)
    module.exit_json(changed=False, shards=shards)


if __name__ == '__main__':
    main()
