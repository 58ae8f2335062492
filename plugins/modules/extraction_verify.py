#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_verify
short_description: Prove an extraction's output on a host
version_added: 0.1.0
description:
  - On a container, checks every shard output dir (C(shard-*)) under O(job_dir). Every manifest row is C(done) and
    its C(.ckpt) file exists with the recorded size (and sha256, O(checksums)); no C(.ckpt) file is missing from
    the manifest; no partial C(*.tmp) file is left; the dataset card's samples, tokens and bytes equal the files';
    the shard is complete.
  - It does not fail on what it finds (RV(problems)); the hosts' results are added up on the controller by the
    filter P(eagle3.extraction.extraction_verify_union#filter) (every sample stored exactly once across all hosts,
    every shard of the count held by one host, one dataset), which names every host's problems with the others'
    (C(playbooks/verify.yml)).
  - Reads only; never changes anything.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  job_dir:
    description:
      - C(<extraction_job_output_root>/<job name>) on the host, an absolute path other than C(/).
    type: path
    required: true
  checksums:
    description:
      - Also compare each file's sha256 with the manifest's (reads every byte).
    type: bool
    default: true
  accept_failed:
    description:
      - Sample ids the user accepts as not extracted (C(extraction_job_accept_failed)), each named whole - no
        pattern, no wildcard. Such a failed sample (the server refused it, its dump was rejected) is no problem -
        it is named in the shard's C(accepted) with its dataset line and reason. An id that did not fail is named
        by the filter P(eagle3.extraction.extraction_verify_union#filter), which sees every host's failures.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.extraction_status
  - plugin: eagle3.extraction.extraction_verify_union
    plugin_type: filter
'''

EXAMPLES = r'''
- name: Check this host's shards
  eagle3.extraction.extraction_verify:
    job_dir: /srv/eagle3-extraction/kimi_k2
  register: verify_host

- name: Keep this host's report
  ansible.builtin.set_fact:
    extraction_verify_report:
      host: "{{ inventory_hostname }}"
      shards: "{{ verify_host.shards }}"

- name: Every sample exactly once across the inventory (the filter runs on the controller)
  vars:
    union: "{{ ansible_play_hosts | map('extract', hostvars, 'extraction_verify_report')
               | eagle3.extraction.extraction_verify_union }}"
  ansible.builtin.assert:
    that: union.problems | length == 0
    fail_msg: "{{ union.msg }}"
    success_msg: "{{ union.msg }}"
  run_once: true
'''

RETURN = r'''
shards:
  description: "Per shard dir, C(ids), C(samples), C(tokens), C(bytes), C(meta), C(card), C(problems), C(failed_ids)
    (every failed sample) and C(accepted) (each accepted failure, C(<id> (line <n>): <reason>))."
  returned: always
  type: list
  elements: dict
problems:
  description: Everything found wrong in this host's shards (the module does not fail on them).
  returned: always
  type: list
  elements: str
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dirs
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import accept_failed_error, verify_shard


def main():
    module = AnsibleModule(
        argument_spec=dict(job_dir=dict(type='path', required=True), checksums=dict(type='bool', default=True),
                           accept_failed=dict(type='list', elements='str', default=[])),
        supports_check_mode=True,
    )
    job_dir = module.params['job_dir']
    if not os.path.isabs(job_dir) or os.path.normpath(job_dir) == '/':
        module.fail_json(msg='job_dir=%r: expected an absolute path other than /' % job_dir)
    refused = accept_failed_error(module.params['accept_failed'])
    if refused:
        module.fail_json(msg='extraction_job_accept_failed=%r: %s' % (module.params['accept_failed'], refused))
    shards = [verify_shard(d, module.params['checksums'], module.params['accept_failed']) for d in shard_dirs(job_dir)]
    # a host's own problems are reported by the union on the controller, with the others'
    module.exit_json(changed=False, shards=shards, problems=[p for s in shards for p in s['problems']])


if __name__ == '__main__':
    main()
