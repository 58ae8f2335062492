#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: unit_reset_failed
short_description: Clear a systemd unit's failed state (and its start count) where systemd keeps one
version_added: 0.1.0
description:
  - The one place the collection runs C(systemctl reset-failed) and decides when. It reads the unit's C(LoadState)
    and C(ActiveState) first.
  - systemd keeps a failed state and a start count only for a unit it has loaded, refuses to start a unit that hit
    its start limit, and refuses C(reset-failed) for a unit it has not loaded. So the reset runs when the unit is
    loaded and failed, or loaded at all with O(start_count=true); a unit that is not loaded (no unit file, or
    unloaded since) is left alone.
  - The reset also sets the unit's C(NRestarts) back to 0.
  - C(changed) is true when the unit was failed (its state becomes C(inactive)); clearing the start count of a
    unit that is not failed changes nothing a user sees and is not reported as a change.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  start_count:
    description:
      - Also clear the start count of a loaded unit that is not failed (after a stop, before the next start; a unit
        systemd restarted on its own may be near its start limit).
    type: bool
    default: false
extends_documentation_fragment:
  - eagle3.extraction.attributes
  - eagle3.extraction.systemd_unit
seealso:
  - module: eagle3.extraction.server_health
  - module: ansible.builtin.systemd_service
'''

EXAMPLES = r'''
- name: Clear the failed state of an earlier start
  eagle3.extraction.unit_reset_failed:
    unit: sglang-extraction.service

- name: After the stop, clear the failed state and the start count
  eagle3.extraction.unit_reset_failed:
    unit: sglang-extraction.service
    start_count: true
'''

RETURN = r'''
load_state:
  description: The unit's C(LoadState) before (V(loaded), V(not-found), ...).
  returned: always
  type: str
  sample: loaded
active_state:
  description: The unit's C(ActiveState) before.
  returned: always
  type: str
  sample: failed
reset:
  description: Whether C(systemctl reset-failed) ran (in check mode, whether it would).
  returned: always
  type: bool
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils import command
from ansible_collections.eagle3.extraction.plugins.module_utils.server_probe import UNIT_NAME, unit_properties

RESET_TIMEOUT = 60


def must_reset(load_state, active_state, start_count):
    """Whether ``systemctl reset-failed`` runs for a unit in these states: the rule, in one place."""
    return load_state == 'loaded' and (active_state == 'failed' or start_count)


def main():
    module = AnsibleModule(
        argument_spec=dict(unit=dict(type='str', required=True), start_count=dict(type='bool', default=False)),
        supports_check_mode=True,
    )
    unit = module.params['unit']
    if not UNIT_NAME.fullmatch(unit):
        module.fail_json(msg='unit=%r is not a unit name ending in .service' % unit)
    before = unit_properties(unit, ('LoadState', 'ActiveState'))
    reset = must_reset(before['LoadState'], before['ActiveState'], module.params['start_count'])
    result = dict(changed=reset and before['ActiveState'] == 'failed', reset=reset,
                  load_state=before['LoadState'], active_state=before['ActiveState'])
    if reset and not module.check_mode:
        argv = ['systemctl', 'reset-failed', '--', unit]
        try:
            rc, out, err = command.run(argv, RESET_TIMEOUT)
        except (OSError, command.CommandTimeout) as exc:
            module.fail_json(msg='%s: %s' % (command.shown(argv), exc), **result)
        if rc != 0:
            module.fail_json(msg='%s failed (rc %d): %s' % (command.shown(argv), rc, (err or out).strip()), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
