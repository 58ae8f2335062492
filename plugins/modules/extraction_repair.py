#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_repair
short_description: Make the extraction job redo what verify finds damaged or missing on a host
version_added: 0.1.0
description:
  - Checks every shard output dir (C(shard-*)) under O(job_dir) as M(eagle3.extraction.extraction_verify) does; each
    C(done) row's C(.ckpt) file must be there with the recorded size (and sha256, O(checksums)).
  - A damaged file (wrong size or sha256) is moved aside, never deleted, to C(<shard>/damaged/<name>.<UTC time>) with
    a C(.reason) file beside it; its new name is linked and fsync'ed before the old one is removed, and does not end
    in C(.ckpt), so SpecForge's loader does not read it. A missing file needs no move.
  - The manifest is the job's and is not written; at its next start the job finds each C(done) row whose file is not
    there and extracts exactly those samples again (and undoes half-written ones). RV(start_shards) names the shards
    whose units must be started for that (C(playbooks/repair.yml) starts them).
  - Works on a shard only while it holds the job's lock (C(<shard>/job.lock)); a shard whose job runs is left alone
    and named in RV(busy).
  - In check mode, reports what would be moved and started; moves nothing and creates no lock file.
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
      - Also compare each file's sha256 with the manifest's (reads every byte); without, only sizes and presence.
    type: bool
    default: true
extends_documentation_fragment:
  - eagle3.extraction.attributes
seealso:
  - module: eagle3.extraction.extraction_verify
'''

EXAMPLES = r'''
- name: Move each damaged file aside; name the shards to start
  eagle3.extraction.extraction_repair:
    job_dir: /srv/eagle3-extraction/kimi_k2
  register: repair
'''

RETURN = r'''
shards:
  description:
    - Per shard dir, C(shard_dir), C(shard_index), C(busy), C(redo) (each C(sample_id), C(path), C(problem)), C(moved)
      (the new paths), C(start), C(problems).
  returned: always
  type: list
  elements: dict
start_shards:
  description: The shard indexes whose units should be started (samples to redo, half-written, or not finished).
  returned: always
  type: list
  elements: int
  sample: [0, 2]
busy:
  description: The shard dirs whose job runs (it holds their lock); nothing was done there.
  returned: always
  type: list
  elements: str
lines:
  description: What was found and done, one line a shard and one a sample to redo.
  returned: always
  type: list
  elements: str
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import MISSING
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dirs
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_repair import repair_lines, repair_shard


def main():
    module = AnsibleModule(
        argument_spec=dict(job_dir=dict(type='path', required=True), checksums=dict(type='bool', default=True)),
        supports_check_mode=True,
    )
    job_dir = module.params['job_dir']
    if not os.path.isabs(job_dir) or os.path.normpath(job_dir) == '/':
        module.fail_json(msg='job_dir=%r: expected an absolute path other than /' % job_dir)
    try:
        shards = [repair_shard(d, module.params['checksums'], module.check_mode) for d in shard_dirs(job_dir)]
    except OSError as exc:
        module.fail_json(msg='cannot repair under job_dir=%r: %s' % (job_dir, exc))
    module.exit_json(
        changed=any(s['moved'] for s in shards) or (module.check_mode and any(
            r['problem'] != MISSING for s in shards for r in s['redo'])),
        shards=shards,
        start_shards=sorted({s['shard_index'] for s in shards if s['start'] and s['shard_index'] is not None}),
        busy=[s['shard_dir'] for s in shards if s['busy']],
        lines=repair_lines(shards))


if __name__ == '__main__':
    main()
