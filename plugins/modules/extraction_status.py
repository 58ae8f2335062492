#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_status
short_description: Read the extraction job's progress on a host, or make one table of many hosts
version_added: 0.1.0
description:
  - With O(job_dir), on a container, reads the C(status.json) of every shard output dir (C(shard-*)) under it,
    as the C(extraction_job) role's job writes it every few seconds, and says whether each job process still runs.
  - With O(reports), on the controller, turns the per-host results into one table, a line per host and shard
    (state, samples done of the shard, tokens/s, ETA, C(/dev/shm) used, output disk free, failed samples, the
    dataset's bad lines that shard counts, errors), and totals
    with the whole job's ETA (the slowest shard's, as the shards run in parallel).
  - Reads only; never changes anything.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  job_dir:
    description:
      - C(<extraction_job_output_root>/<job name>) on the host, an absolute path.
      - Exactly one of O(job_dir) and O(reports).
    type: path
  reports:
    description:
      - One item per host, C({host, statuses}) (the RV(statuses) of a O(job_dir) run) or C({host, error}).
    type: list
    elements: dict
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.extraction_verify
'''

EXAMPLES = r'''
- name: Read the job's progress
  eagle3.extraction.extraction_status:
    job_dir: /srv/eagle3-extraction/kimi_k2
  register: progress

- name: One table for the inventory
  eagle3.extraction.extraction_status:
    reports: "{{ ansible_play_hosts_all | map('extract', hostvars, 'extraction_status_report') | list }}"
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
statuses:
  description: With O(job_dir), each shard's status file with C(alive) and C(age_s) (seconds since its update).
  returned: with job_dir
  type: list
  elements: dict
  sample: [{shard_index: 0, shard_count: 3, state: running, samples_done: 120, samples_total: 667, alive: true}]
lines:
  description: With O(reports), the table, one string a line.
  returned: with reports
  type: list
  elements: str
totals:
  description:
    - With O(reports), samples and tokens done and total, tokens/s, C(samples_failed), C(bad_lines) (each bad line
      of the dataset once), C(errors), C(eta_s) (null when unknown), C(shards_missing) (the indexes of the
      job's shards that no status reports; a line of the table names them).
  returned: with reports
  type: dict
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dirs
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_status import read_status
from ansible_collections.eagle3.extraction.plugins.module_utils.status_table import status_table


def main():
    module = AnsibleModule(
        argument_spec=dict(job_dir=dict(type='path'), reports=dict(type='list', elements='dict')),
        mutually_exclusive=[('job_dir', 'reports')],
        required_one_of=[('job_dir', 'reports')],
        supports_check_mode=True,
    )
    if module.params['job_dir'] is not None:
        job_dir = module.params['job_dir']
        if not os.path.isabs(job_dir) or os.path.normpath(job_dir) == '/':
            module.fail_json(msg='job_dir=%r: expected an absolute path other than /' % job_dir)
        statuses = [read_status(d) for d in shard_dirs(job_dir)]
        module.exit_json(changed=False, statuses=statuses)
    for n, report in enumerate(module.params['reports']):
        if not isinstance(report.get('host'), str) or not (
                isinstance(report.get('statuses'), list) or report.get('error')):
            module.fail_json(msg='reports[%d]: expected {host, statuses} or {host, error}' % n)
    module.exit_json(changed=False, **status_table(module.params['reports']))


if __name__ == '__main__':
    main()
