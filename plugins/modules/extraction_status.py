#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_status
short_description: Read the extraction job's progress on a host
version_added: 0.1.0
description:
  - On a container, reads the C(status.json) of every shard output dir (C(shard-*)) under O(job_dir), as the
    C(extraction_job) role's job writes it every few seconds, and says whether each job process still runs.
  - The hosts' results make one table on the controller with the filter
    P(eagle3.extraction.extraction_status_table#filter) (C(playbooks/status.yml)).
  - Reads only; never changes anything.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  job_dir:
    description:
      - C(<extraction_job_output_root>/<job name>) on the host, an absolute path other than C(/).
    type: path
    required: true
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.extraction_verify
  - plugin: eagle3.extraction.extraction_status_table
    plugin_type: filter
'''

EXAMPLES = r'''
- name: Read the job's progress
  eagle3.extraction.extraction_status:
    job_dir: /srv/eagle3-extraction/kimi_k2
  register: progress

- name: Keep this host's report
  ansible.builtin.set_fact:
    extraction_status_report:
      host: "{{ inventory_hostname }}"
      statuses: "{{ progress.statuses }}"

- name: One table for the inventory (the filter runs on the controller)
  ansible.builtin.debug:
    msg: "{{ (ansible_play_hosts_all | map('extract', hostvars, 'extraction_status_report')
              | eagle3.extraction.extraction_status_table).text }}"
  run_once: true
'''

RETURN = r'''
statuses:
  description: Each shard's status file with C(alive) and C(age_s) (seconds since its update).
  returned: always
  type: list
  elements: dict
  sample: [{shard_index: 0, shard_count: 3, state: running, samples_done: 120, samples_total: 667, alive: true}]
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dirs
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_status import read_status


def main():
    module = AnsibleModule(argument_spec=dict(job_dir=dict(type='path', required=True)), supports_check_mode=True)
    job_dir = module.params['job_dir']
    if not os.path.isabs(job_dir) or os.path.normpath(job_dir) == '/':
        module.fail_json(msg='job_dir=%r: expected an absolute path other than /' % job_dir)
    module.exit_json(changed=False, statuses=[read_status(d) for d in shard_dirs(job_dir)])


if __name__ == '__main__':
    main()
