#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_verify
short_description: Prove an extraction's output, per host and across the inventory
version_added: 0.1.0
description:
  - With O(job_dir), on a container, checks every shard output dir (C(shard-*)) under it. Every manifest row is
    C(done) and its C(.ckpt) file exists with the recorded size (and sha256, O(checksums)); no C(.ckpt) file is
    missing from the manifest; no partial C(*.tmp) file is left; the dataset card's samples, tokens and bytes equal
    the files'; the shard is complete.
  - With O(reports), on the controller, adds the hosts up. Every sample is stored exactly once across all hosts;
    every shard of the count is held by exactly one host; all shards come from one dataset. Returns the totals and
    fails listing every problem.
  - Reads only; never changes anything.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  job_dir:
    description:
      - C(<extraction_job_output_root>/<job name>) on the host, an absolute path. Exactly one of O(job_dir) and
        O(reports).
    type: path
  checksums:
    description:
      - With O(job_dir), also compare each file's sha256 with the manifest's (reads every byte).
    type: bool
    default: true
  reports:
    description:
      - One item per host, C({host, shards}) with the RV(shards) of a O(job_dir) run.
    type: list
    elements: dict
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.extraction_status
'''

EXAMPLES = r'''
- name: Check this host's shards
  eagle3.extraction.extraction_verify:
    job_dir: /srv/eagle3-extraction/kimi_k2
  register: verify_host

- name: Every sample exactly once across the inventory
  eagle3.extraction.extraction_verify:
    reports: "{{ ansible_play_hosts | map('extract', hostvars, 'extraction_verify_report') | list }}"
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
shards:
  description: With O(job_dir), per shard dir, C(ids), C(samples), C(tokens), C(bytes), C(meta), C(card), C(problems).
  returned: with job_dir
  type: list
  elements: dict
problems:
  description: Everything found wrong; the module fails when it is not empty.
  returned: always
  type: list
  elements: str
notes:
  description:
    - With O(reports), one line per leftover copy of a handed-over shard, which is not counted, and one line with
      the dataset's bad lines (how many, the first ones) when there are any. A shard held in
      several places counts once when one copy is complete and sound and every other copy's samples are in it
      (its first host came back after the shard was handed over); copies that disagree are a problem.
  returned: with reports
  type: list
  elements: str
totals:
  description:
    - With O(reports), C(samples), C(unique_samples), C(tokens), C(bytes) over all hosts, and C(bad_lines), the
      dataset's lines that are no sample (not extracted; each counted by one shard).
    - The notes then name the first bad lines (line number, id as far as it can be read, reason).
  returned: with reports
  type: dict
msg:
  description: With O(reports) and no problem, the totals and the notes in one line, for a report.
  returned: with reports, on success
  type: str
  sample: 'verified: 1000 samples exactly once, 2048000 tokens, 14680064000 bytes'
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dirs
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import verify_shard
from ansible_collections.eagle3.extraction.plugins.module_utils.verify_union import verified_message, verify_union


def main():
    module = AnsibleModule(
        argument_spec=dict(job_dir=dict(type='path'), checksums=dict(type='bool', default=True),
                           reports=dict(type='list', elements='dict')),
        mutually_exclusive=[('job_dir', 'reports')],
        required_one_of=[('job_dir', 'reports')],
        supports_check_mode=True,
    )
    if module.params['job_dir'] is not None:
        job_dir = module.params['job_dir']
        if not os.path.isabs(job_dir) or os.path.normpath(job_dir) == '/':
            module.fail_json(msg='job_dir=%r: expected an absolute path other than /' % job_dir)
        shards = [verify_shard(d, module.params['checksums']) for d in shard_dirs(job_dir)]
        problems = [p for s in shards for p in s['problems']]
        # a host's own problems are reported by the union step with the others'
        module.exit_json(changed=False, shards=shards, problems=problems)
    for n, report in enumerate(module.params['reports']):
        if not isinstance(report.get('host'), str) or not isinstance(report.get('shards'), list):
            module.fail_json(msg='reports[%d]: expected {host, shards}' % n)
    result = verify_union(module.params['reports'])
    if result['problems']:
        module.fail_json(msg='%d problem(s): %s' % (len(result['problems']), '; '.join(result['problems'][:20])),
                         changed=False, **result)
    module.exit_json(changed=False, msg=verified_message(result), **result)


if __name__ == '__main__':
    main()
