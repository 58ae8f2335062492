#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: online_training_status
short_description: Read how far SpecForge's online producer and consumer of the newest attempt got
version_added: 0.1.0
description:
  - Reads the newest attempt of the run O(run_id) under O(control_root) (C(attempt-NNNN), the layout of
    M(eagle3.extraction.online_training_attempt)), and there SpecForge's markers beside C(control/refs.jsonl), the refs the
    producer published (the channel's lines) and the consumer counted consumed (C(refs.jsonl.consumed_count)).
  - With O(consumer=specforge) the step, loss, learning rate and samples/s are the last step line (C(step N) and a dict) of
    the attempt's C(consumer.log); with O(consumer=reader) the samples/s are the reader's C(progress.json) of the
    attempt under O(output_dir) (C(<run_id>-reader/attempt-NNNN/)), and there is no step or loss (the reader trains
    nothing).
  - The units O(units) say whether an open attempt runs. Changes nothing; check mode reads the same.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  consumer:
    description: What consumes the features, V(specforge) (the trainer) or V(reader).
    type: str
    choices: [specforge, reader]
    default: specforge
  units:
    description: The producer's and the consumer's systemd units (C(.service)); an open attempt runs while one does.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - eagle3.extraction.attributes
  - eagle3.extraction.online_training_run
seealso:
  - module: eagle3.extraction.online_training_attempt
'''

EXAMPLES = r'''
- name: How far the trainer got
  eagle3.extraction.online_training_status:
    control_root: /var/lib/eagle3-online
    run_id: eagle3-online
    output_dir: /srv/eagle3-online/output
    consumer: specforge
    units: [eagle3-online-producer.service, eagle3-online-consumer.service]
  register: trainer
'''

RETURN = r'''
state:
  description:
    - V(not-started) (no attempt), V(running) (open, a unit runs), V(stopped) (open, no unit runs),
      V(finished) (the consumer finished) or V(failed) (RV(reason) says why).
  returned: always
  type: str
  sample: running
attempt:
  description: The newest attempt's number, 0 when none.
  returned: always
  type: int
reason:
  description: The failure marker's text of a failed attempt, else empty.
  returned: always
  type: str
step:
  description: The consumer's last logged optimizer step, or null.
  returned: always
  type: int
loss:
  description: The loss of that step, or null.
  returned: always
  type: float
lr:
  description: The learning rate of that step, or null.
  returned: always
  type: float
samples_per_s:
  description: The consumer's samples a second (the trainer's last step line, or the reader's progress), or null.
  returned: always
  type: float
published:
  description: The refs (samples) the producer published in the attempt.
  returned: always
  type: int
consumed:
  description: The refs the consumer counted consumed.
  returned: always
  type: int
units:
  description: Each unit of O(units) with its C(ActiveState)/C(SubState).
  returned: always
  type: dict
logs:
  description: The attempt's producer and consumer log files, or empty when no attempt.
  returned: always
  type: dict
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import (
    UNIT_NAME, unit_properties, unit_running)
from ansible_collections.eagle3.extraction.plugins.module_utils.specforge_attempt import (
    RUN_ARGUMENT_SPEC, attempt_dirs, attempt_state, attempts, run_input_error)
from ansible_collections.eagle3.extraction.plugins.module_utils.specforge_progress import (
    LOGS, channel_counts, last_step, reader_progress)
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show


def read(params):
    """The module's result less changed."""
    result = {'state': 'not-started', 'attempt': 0, 'reason': '', 'step': None, 'loss': None, 'lr': None,
              'samples_per_s': None, 'published': 0, 'consumed': 0, 'units': {}, 'logs': {}}
    running = False
    for unit in params['units']:
        props = unit_properties(unit, ('ActiveState', 'SubState'))
        result['units'][unit] = '%s/%s' % (props['ActiveState'] or 'unknown', props['SubState'] or 'unknown')
        running = running or unit_running(props['ActiveState'])
    run_root = os.path.join(params['control_root'], params['run_id'])
    numbers = attempts(run_root)
    if not numbers:
        return result
    attempt_dir = os.path.join(run_root, 'attempt-%04d' % numbers[-1])
    control = attempt_dirs(attempt_dir)[0]
    state, reason = attempt_state(control)
    if state == 'open':
        state = 'running' if running else 'stopped'
    logs = {role: os.path.join(attempt_dir, name) for role, name in LOGS.items()}
    result.update(state=state, attempt=numbers[-1], reason=reason, logs=logs, **channel_counts(control))
    if params['consumer'] == 'reader':
        progress = reader_progress(params['output_dir'], params['run_id'], numbers[-1])
        rate = progress.get('samples_per_s')
        result['samples_per_s'] = float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None
    else:
        result.update(last_step(logs['consumer']))
    return result


def main():
    module = AnsibleModule(argument_spec=dict(
        RUN_ARGUMENT_SPEC,
        consumer=dict(type='str', choices=['specforge', 'reader'], default='specforge'),
        units=dict(type='list', elements='str', default=[])),
        supports_check_mode=True)
    params = module.params
    error = run_input_error(params)
    if error:
        module.fail_json(msg=error)
    for unit in params['units']:
        if not UNIT_NAME.fullmatch(unit):
            module.fail_json(msg='units holds %s, not a unit name ending in .service' % show(unit))
    module.exit_json(changed=False, **read(params))


if __name__ == '__main__':
    main()
