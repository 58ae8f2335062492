#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: online_training_attempt
short_description: Decide and make the SpecForge online attempt a run goes on with
version_added: 0.1.0
description:
  - SpecForge 0.2.0 never resumes a producer, so every attempt has fresh control and consumer-state dirs,
    C(<control_root>/<run_id>/attempt-NNNN/{control,consumer-state}).
  - Reads the newest attempt's markers beside C(control/refs.jsonl) (SpecForge's own). No marker (running, or
    stopped without one) goes on with it (V(continue)); the consumer then resumes from the newest
    C(<run_id>-step<N>) checkpoint under O(output_dir) (RV(resume_from)). C(.failed) or C(.consumer_failed)
    starts a new attempt (V(start)) whose draft begins from that checkpoint's weights (RV(draft_checkpoint)).
    C(.consumer_done) is a finished run, which starts nothing (V(none)) unless O(restart).
  - Makes the new attempt's dirs (C(changed)); in check mode says what it would make.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  restart:
    description: Start a new attempt although the newest one finished.
    type: bool
    default: false
extends_documentation_fragment:
  - eagle3.extraction.attributes
  - eagle3.extraction.online_training_run
'''

EXAMPLES = r'''
- name: Decide the attempt
  eagle3.extraction.online_training_attempt:
    control_root: /srv/eagle3-online/control
    run_id: kimi_k2_online
    output_dir: /srv/eagle3-online/output/kimi_k2_online
  register: attempt
'''

RETURN = r'''
action:
  description: V(start) (a new attempt), V(continue) (the newest attempt, still open) or V(none) (finished).
  returned: always
  type: str
attempt:
  description: The attempt's number.
  returned: always
  type: int
control_dir:
  description: The attempt's C(deployment.disaggregated.control_dir).
  returned: always
  type: str
consumer_state_dir:
  description: The attempt's C(deployment.disaggregated.consumer_state_dir).
  returned: always
  type: str
resume_from:
  description: The checkpoint the consumer resumes from within an open attempt (C(training.resume_from)), or empty.
  returned: always
  type: str
draft_checkpoint:
  description: A new attempt's starting weights (C(model.draft_checkpoint_path)), or empty.
  returned: always
  type: str
previous_state:
  description: The newest attempt's state before this call, V(none), V(open), V(finished) or V(failed).
  returned: always
  type: str
previous_reason:
  description: The failure marker's text of a failed attempt.
  returned: always
  type: str
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.specforge_attempt import (
    RUN_ARGUMENT_SPEC, decide, run_input_error)


def main():
    module = AnsibleModule(argument_spec=dict(RUN_ARGUMENT_SPEC, restart=dict(type='bool', default=False)),
                           supports_check_mode=True)
    params = module.params
    error = run_input_error(params)
    if error:
        module.fail_json(msg=error)
    result = decide(os.path.join(params['control_root'], params['run_id']), params['output_dir'],
                    params['run_id'], restart=params['restart'])
    changed = result['action'] == 'start'
    if changed and not module.check_mode:
        for path in (result['control_dir'], result['consumer_state_dir']):
            os.makedirs(path, mode=0o750, exist_ok=True)
    module.exit_json(changed=changed, **result)


if __name__ == '__main__':
    main()
