#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: extraction_job_dataset
short_description: One dataset for each extraction job - refuse a dataset changed under the same job name, for the whole job
version_added: 0.1.0
description:
  - The extraction job pins each shard's output to the sha256 of the dataset it was started with (the C(meta) table of
    the shard's C(manifest.sqlite)), and refuses to start a shard with another. A shard whose job never opened its
    manifest would take a changed dataset while the others refuse it; this module refuses the change once, for the
    whole job, before any shard starts (C(extract.yml) runs it before it brings any server up).
  - With O(job_dir), on a host, reads the dataset sha256 each shard under it was started with, and returns it with the
    dataset this run would give the job (O(dataset_sha256), computed on the controller, or with O(hash_dataset) the
    sha256 of O(dataset) on the host) as RV(report).
  - With O(reports), on the controller, compares the reports of every host, job by job (by name), and fails naming
    the job, the datasets, the shards started with another one, and the fix, when a job would have more than one.
  - Reads only; never changes anything.
author:
  - eagle3.extraction maintainers (@eagle3)
options:
  job_dir:
    description:
      - C(<extraction_job_output_root>/<extraction_job_name>) on the host, an absolute path. Exactly one of
        O(job_dir) and O(reports).
    type: path
  host:
    description:
      - With O(job_dir), the host's name in the inventory (the report names it).
    type: str
  job:
    description:
      - With O(job_dir), the job's name (C(extraction_job_name)).
    type: str
  dataset:
    description:
      - With O(job_dir), the dataset as the inventory gives it (C(extraction_job_dataset)), for the message.
    type: str
  dataset_sha256:
    description:
      - With O(job_dir), the sha256 of the dataset this run would give the job, when it was computed elsewhere (a
        dataset on the controller). Required unless O(hash_dataset).
    type: str
  hash_dataset:
    description:
      - With O(job_dir), compute the sha256 of O(dataset) here, on the host (C(extraction_job_dataset_on_host)).
    type: bool
    default: false
  reports:
    description:
      - One RV(report) per host that runs a job (hosts that could not be read are left out).
    type: list
    elements: dict
extends_documentation_fragment:
  - eagle3.extraction.attributes
notes:
  - A host that cannot be read is not compared; the job still refuses, in its log and status, to start a shard whose
    manifest names another dataset.
'''

EXAMPLES = r'''
- name: What the job's shards on this host were started with
  eagle3.extraction.extraction_job_dataset:
    job_dir: /srv/eagle3-extraction/demo
    host: "{{ inventory_hostname }}"
    job: demo
    dataset: /data/demo.jsonl
    dataset_sha256: "{{ dataset_stat.stat.checksum }}"
  register: job_dataset

- name: One dataset for each job
  eagle3.extraction.extraction_job_dataset:
    reports: "{{ groups['extraction_servers'] | map('extract', hostvars, ['job_dataset', 'report']) | select('defined') | list }}"
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
report:
  description: With O(job_dir), C({host, job, dataset, sha256, pinned}); C(pinned) maps each shard dir's name to the
    dataset sha256 its manifest was started with (shards that pinned none are left out).
  returned: with job_dir
  type: dict
  sample: {host: ct1, job: demo, dataset: /data/demo.jsonl, sha256: 3b0c..., pinned: {shard-0-of-3: 3b0c...}}
jobs:
  description: With O(reports), each job's name and its one dataset sha256.
  returned: with reports, when no job has two
  type: dict
'''

import os
import re
import sqlite3

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import file_sha256
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_files import MANIFEST
from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dirs

SHA256_RE = re.compile(r'[0-9a-f]{64}')
# the meta key of the dataset in the job's manifest (eagle3_extraction_job/manifest.py)
PIN = 'dataset_sha256'


def pinned(job_dir):
    """``{shard dir name: dataset sha256}`` of the shards under ``job_dir`` whose manifest pinned one.
    Raises ValueError naming a manifest that cannot be read."""
    found = {}
    for shard_dir in shard_dirs(job_dir):
        path = os.path.join(shard_dir, MANIFEST)
        if not os.path.isfile(path):
            continue
        try:
            db = sqlite3.connect('file:%s?mode=ro' % path, uri=True)
            try:
                row = db.execute('SELECT value FROM meta WHERE key = ?', (PIN,)).fetchone()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise ValueError('%s cannot be read as the job\'s manifest: %s' % (path, exc))
        if row:
            found[os.path.basename(shard_dir)] = str(row[0])
    return found


def short(sha):
    return sha[:12] if sha else '?'


def conflicts(reports):
    """One message per job (by name) that would have more than one dataset; [] when none."""
    jobs = {}
    for report in reports:
        jobs.setdefault(report['job'], []).append(report)
    messages = []
    for job in sorted(jobs):
        given = {}    # sha -> [(host, dataset)] this run gives
        started = {}  # sha -> ['shard on host'] the shards were started with
        for report in jobs[job]:
            if report.get('sha256'):
                given.setdefault(report['sha256'], []).append((report['host'], report.get('dataset')))
            for shard, sha in sorted((report.get('pinned') or {}).items()):
                started.setdefault(sha, []).append('%s on %s' % (shard, report['host']))
        if len(set(given) | set(started)) <= 1:
            continue
        parts = []
        for sha in sorted(given):
            datasets = sorted(set(dataset for dummy, dataset in given[sha]))
            parts.append('extraction_job_dataset=%s (sha256 %s) on %s' % (
                ', '.join(datasets), short(sha), ', '.join(sorted(host for host, dummy in given[sha]))))
        for sha in sorted(started):
            parts.append('%s started with sha256 %s' % (', '.join(started[sha]), short(sha)))
        messages.append(
            "job '%s' would have more than one dataset: %s. Nothing was started or changed for it. Restore the "
            "dataset its shards were started with, or give the changed one another extraction_job_name (a new job "
            "with its own output dir)." % (job, '; '.join(parts)))
    return messages


def read_host(module, params):
    # given (required_by) but empty: refused as missing
    for name in ('host', 'job', 'dataset'):
        if not params[name]:
            module.fail_json(msg='with job_dir, %s must not be empty' % name)
    job_dir = params['job_dir']
    if not os.path.isabs(job_dir) or os.path.normpath(job_dir) == '/':
        module.fail_json(msg='job_dir=%r: expected an absolute path other than /' % job_dir)
    if params['hash_dataset']:
        try:
            sha = file_sha256(params['dataset'])
        except OSError as exc:
            module.fail_json(msg='extraction_job_dataset=%r cannot be read on %s: %s'
                             % (params['dataset'], params['host'], exc))
    else:
        sha = params['dataset_sha256']
        if not sha:
            module.fail_json(msg='extraction_job_dataset=%r: no sha256 (it is not a readable file on the controller)'
                             % (params['dataset'],))
        if not isinstance(sha, str) or not SHA256_RE.fullmatch(sha):
            module.fail_json(msg='dataset_sha256=%r: expected 64 hex digits (or hash_dataset=true)' % (sha,))
    try:
        found = pinned(job_dir)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, report=dict(host=params['host'], job=params['job'], dataset=params['dataset'],
                                                sha256=sha, pinned=found))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            job_dir=dict(type='path'),
            host=dict(type='str'),
            job=dict(type='str'),
            dataset=dict(type='str'),
            dataset_sha256=dict(type='str', no_log=False),
            hash_dataset=dict(type='bool', default=False),
            reports=dict(type='list', elements='dict'),
        ),
        mutually_exclusive=[('job_dir', 'reports')],
        required_one_of=[('job_dir', 'reports')],
        required_by={'job_dir': ('host', 'job', 'dataset')},
        supports_check_mode=True,
    )
    params = module.params
    if params['job_dir'] is not None:
        read_host(module, params)
    for n, report in enumerate(params['reports']):
        if not all(isinstance(report.get(key), str) and report.get(key) for key in ('host', 'job')) or not (
                isinstance(report.get('pinned', {}), dict)):
            module.fail_json(msg='reports[%d]: expected {host, job, dataset, sha256, pinned}' % n)
    messages = conflicts(params['reports'])
    if messages:
        module.fail_json(msg=' '.join(messages))
    jobs = {}
    for report in params['reports']:
        jobs[report['job']] = report.get('sha256') or next(iter((report.get('pinned') or {}).values()), '')
    module.exit_json(changed=False, jobs=jobs)


if __name__ == '__main__':
    main()
