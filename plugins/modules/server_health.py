#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: server_health
short_description: Wait for a systemd-run server's /health to answer 200, or tell why it died
version_added: 0.1.0
description:
  - Polls O(url) once a second for up to O(timeout) seconds while watching the systemd unit O(unit). Stops as soon as
    the server answers 200 (RV(state=ready)) or the unit fails, stops or restarts (RV(state=died)); after
    O(timeout) the state is V(starting).
  - With O(timeout=0) it looks once; the role reads RV(restarts) and RV(log_size) that way before a start, so that
    the wait afterwards notices a restart and shows only the new start's log lines, and the unit's state
    (RV(load_state), RV(active_state), RV(running)) that the reclamation, extract.yml and stop go by.
  - Returns the last 50 lines of O(log_file) written since O(log_offset), the newest of them, and the cause of
    death it recognises (a missing Python module, a port in use, CUDA out of memory, an NCCL error). Every log line
    returned is redacted (C(--api-key) values, tokens, passwords).
  - Changes nothing.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  url:
    description:
      - The health URL, V(http://) or V(https://).
    type: str
    required: true
  log_file:
    description:
      - The server's log file. Empty returns no log lines.
    type: path
    default: ''
  log_offset:
    description:
      - Size of O(log_file) before the start. Only what was written after it is returned (all of it when the file
        shrank).
    type: int
    default: 0
  restarts_before:
    description:
      - The unit's C(NRestarts) before the start; more restarts than this means the server died and systemd restarted
        it.
    type: int
    default: 0
  timeout:
    description:
      - Seconds to wait for 200, from 0 (look once) to 86400.
    type: float
    default: 0
extends_documentation_fragment:
  - eagle3.extraction.attributes
  - eagle3.extraction.systemd_unit
seealso:
  - module: ansible.builtin.uri
    description: One HTTP request, without the unit's state or the log.
'''

EXAMPLES = r'''
- name: Read the restarts and the log's size before starting the unit
  eagle3.extraction.server_health:
    unit: sglang-extraction.service
    url: http://127.0.0.1:30000/health
    log_file: /var/log/sglang/extraction.log
  register: before

- name: Wait a minute for 200
  eagle3.extraction.server_health:
    unit: sglang-extraction.service
    url: http://127.0.0.1:30000/health
    log_file: /var/log/sglang/extraction.log
    log_offset: "{{ before.log_size }}"
    restarts_before: "{{ before.restarts }}"
    timeout: 60
  register: waited
'''

RETURN = r'''
state:
  description: V(ready) (200), V(starting) (not yet) or V(died) (the unit failed, stopped or was restarted).
  returned: always
  type: str
  sample: ready
http:
  description: The last HTTP status of O(url), null when nothing answered.
  returned: always
  type: int
load_state:
  description: The unit's C(LoadState) at the end (V(loaded), V(not-found), ...).
  returned: always
  type: str
  sample: loaded
active_state:
  description: The unit's C(ActiveState) at the end.
  returned: always
  type: str
  sample: active
running:
  description:
    - Whether the unit runs or is about to (its C(ActiveState) is V(active), V(activating) or V(reloading)), at the
      end. The one answer to "is the unit running" that the roles and playbooks read.
  returned: always
  type: bool
  sample: true
restarts:
  description: The unit's C(NRestarts) at the end.
  returned: always
  type: int
log_size:
  description: Size of O(log_file) in bytes at the end, 0 when it does not exist.
  returned: always
  type: int
unit:
  description: The unit's state in words.
  returned: always
  type: str
  sample: active/running, 0 automatic restarts
tail:
  description: The last 50 lines of O(log_file) since O(log_offset), redacted.
  returned: always
  type: list
  elements: str
newest:
  description: The newest of RV(tail), or empty.
  returned: always
  type: str
cause:
  description: The recognised cause of a failure in RV(tail), or empty.
  returned: always
  type: str
  sample: the port is already in use (Address already in use)
'''

import math
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.redact import redact_text
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import (
    UNIT_NAME, health, log_tail, unit_properties, unit_running)

URL = re.compile(r'https?://[^\s/?#]+(/[^\s]*)?')

# (text found in a log line, the cause in words); the first that matches wins
CAUSES = [
    ('No module named', 'a Python module is missing from the venv (No module named ...)'),
    ('Address already in use', 'the port is already in use (Address already in use)'),
    ('address already in use', 'the port is already in use (Address already in use)'),
    ('CUDA out of memory', 'CUDA out of memory (GPU memory still held or mem-fraction-static too high)'),
    ('OutOfMemoryError', 'CUDA out of memory (GPU memory still held or mem-fraction-static too high)'),
    ('NCCL error', 'NCCL error (check the NCCL_* variables, /dev/shm and the interconnect)'),
    ('NCCL WARN', 'NCCL error (check the NCCL_* variables, /dev/shm and the interconnect)'),
]
DEAD_STATES = ('failed', 'inactive', 'deactivating')
PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'NRestarts')


def recognised_cause(lines):
    for text, why in CAUSES:
        if any(text in line for line in lines):
            return why
    return ''


def as_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def watch(unit, url, restarts_before, timeout):
    """(state, last HTTP status, the unit's properties at the end)."""
    deadline = time.monotonic() + timeout
    code = None
    while True:
        props = unit_properties(unit, PROPERTIES)
        died = (props['ActiveState'] in DEAD_STATES or props['SubState'] == 'auto-restart'
                or as_int(props['NRestarts']) > restarts_before)
        if died:
            return 'died', code, props
        code = health(url)
        if code == 200:
            return 'ready', code, props
        if time.monotonic() >= deadline:
            return 'starting', code, props
        time.sleep(1)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type='str', required=True),
            url=dict(type='str', required=True),
            log_file=dict(type='path', default=''),
            log_offset=dict(type='int', default=0),
            restarts_before=dict(type='int', default=0),
            timeout=dict(type='float', default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not UNIT_NAME.fullmatch(params['unit']):
        module.fail_json(msg='unit=%r is not a unit name ending in .service' % params['unit'])
    if not URL.fullmatch(params['url']):
        module.fail_json(msg='url=%r is not an http:// or https:// URL' % params['url'])
    for name in ('log_offset', 'restarts_before'):
        if params[name] < 0:
            module.fail_json(msg='%s=%r must be 0 or more' % (name, params[name]))
    if not (math.isfinite(params['timeout']) and 0 <= params['timeout'] <= 86400):
        module.fail_json(msg='timeout=%r must be from 0 to 86400 seconds' % params['timeout'])

    state, code, props = watch(params['unit'], params['url'], params['restarts_before'], params['timeout'])
    log_file = params['log_file']
    lines = [redact_text(line) for line in log_tail(log_file, params['log_offset'])] if log_file else []
    try:
        log_size = os.path.getsize(log_file) if log_file else 0
    except OSError:
        log_size = 0
    module.exit_json(
        changed=False, state=state, http=code,
        load_state=props['LoadState'], active_state=props['ActiveState'], running=unit_running(props['ActiveState']),
        restarts=as_int(props['NRestarts']), log_size=log_size,
        unit='%s/%s, %s automatic restarts' % (props['ActiveState'], props['SubState'], props['NRestarts']),
        tail=lines, newest=lines[-1] if lines else '', cause=recognised_cause(lines),
    )


if __name__ == '__main__':
    main()
