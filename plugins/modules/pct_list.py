#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pct_list
short_description: The LXC containers of a Proxmox VE node and their status, from pct list
version_added: 0.1.0
description:
  - Runs C(pct list) on the Proxmox VE node and returns each container's status, lock and name, and the IDs
    of those that run, so that no task parses pct's output.
  - Returns too, for each container, the fingerprint of its configuration file C(<conf_dir>/<vmid>.conf) in
    RV(config_states), the value M(eagle3.extraction.converged_state) returns with
    O(eagle3.extraction.converged_state#module:mode=digest) for that one file, so that the converged check of
    C(extract.yml) compares a container's configuration with the one recorded without another call to the node.
  - Reads only.
  - A C(pct) that fails or hangs fails the task with pct's exit code and error output (RV(rc), RV(stderr)).
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  pct_path:
    description:
      - Path of the C(pct) program.
    type: path
    default: /usr/sbin/pct
  command_timeout:
    description:
      - Seconds C(pct list) may take.
    type: int
    default: 120
  conf_dir:
    description:
      - Where the node keeps its containers' configuration files (C(<vmid>.conf)).
    type: path
    default: /etc/pve/lxc
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads only, so check mode runs it unchanged.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - A Proxmox VE node (C(pct)).
notes:
  - V(changed) is always V(false).
seealso:
  - module: eagle3.extraction.pct_container
    description: Create, configure, start and stop one container.
"""

EXAMPLES = r"""
- name: List the containers of each hypervisor
  eagle3.extraction.pct_list:
  register: pct_list

- name: Say whether CT 101 runs
  ansible.builtin.debug:
    msg: "{{ 101 in pct_list.running }}"
"""

RETURN = r"""
containers:
  description: Every container of the node, by ID (a string, as JSON has it), with its status, lock and name.
  returned: success
  type: dict
  sample: {'101': {status: running, lock: '', name: ct1}, '102': {status: stopped, lock: backup, name: ct2}}
running:
  description: The IDs of the containers that run.
  returned: success
  type: list
  elements: int
  sample: [101]
config_states:
  description:
    - Each container's configuration fingerprint, by ID (a string), as
      M(eagle3.extraction.converged_state) O(eagle3.extraction.converged_state#module:mode=digest) gives it for that one
      file (a file that cannot be read counts as absent).
  returned: success
  type: dict
  sample: {'101': 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
rc:
  description: pct's exit code.
  returned: always
  type: int
  sample: 0
stderr:
  description: What pct printed on its error output.
  returned: always
  type: str
  sample: ''
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils import command
from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import fingerprint
from ansible_collections.eagle3.extraction.plugins.module_utils.pct import PctOutputError, parse_list


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pct_path=dict(type='path', default='/usr/sbin/pct'),
            command_timeout=dict(type='int', default=120),
            conf_dir=dict(type='path', default='/etc/pve/lxc'),
        ),
        supports_check_mode=True,
    )
    argv = [module.params['pct_path'], 'list']
    if module.params['command_timeout'] < 1:
        module.fail_json(msg='command_timeout: %s is not a number of seconds >= 1' % module.params['command_timeout'])
    try:
        rc, out, err = command.run(argv, module.params['command_timeout'])
    except command.CommandTimeout as exc:
        module.fail_json(msg=str(exc), rc=None, stderr='')
    except OSError as exc:
        module.fail_json(msg='pct_path %s cannot be run: %s' % (argv[0], exc.strerror or exc), rc=None, stderr='')
    if rc != 0:
        module.fail_json(msg='%s failed with exit code %d: %s' % (command.shown(argv), rc, err.strip()),
                         rc=rc, stderr=err)
    try:
        containers = parse_list(out)
    except PctOutputError as exc:
        module.fail_json(msg=str(exc), rc=rc, stderr=err)
    conf_dir = module.params['conf_dir']
    module.exit_json(changed=False, rc=rc, stderr=err,
                     containers=dict((str(vmid), values) for vmid, values in sorted(containers.items())),
                     config_states=dict((str(vmid), fingerprint({'files': [os.path.join(conf_dir, '%d.conf' % vmid)]}))
                                        for vmid in sorted(containers)),
                     running=sorted(vmid for vmid, values in containers.items() if values['status'] == 'running'))


if __name__ == '__main__':
    main()
