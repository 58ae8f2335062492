"""extraction_status on a host: each shard dir's status as the job wrote it, changing nothing; the table of
every host is the filter extraction_status_table's, on the controller (the module takes no reports)."""

from __future__ import annotations

import json

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_layout import shard_dir_name
from ansible_collections.eagle3.extraction.plugins.modules import extraction_status


def test_each_shards_status_under_the_job_dir(tmp_path, run_module):
    for index in (1, 0):
        shard = tmp_path / shard_dir_name(index, 2)
        shard.mkdir()
        (shard / 'status.json').write_text(json.dumps({'shard_index': index, 'shard_count': 2, 'state': 'complete',
                                                       'samples_done': 4, 'samples_total': 4}))
    (tmp_path / 'not-a-shard').mkdir()
    result = run_module(extraction_status, {'job_dir': str(tmp_path)})
    assert not result['changed'] and [s['shard_index'] for s in result['statuses']] == [0, 1]
    assert all(s['state'] == 'complete' and s['alive'] is False for s in result['statuses'])


def test_a_job_that_never_ran_has_no_status(tmp_path, run_module):
    assert run_module(extraction_status, {'job_dir': str(tmp_path / 'none')})['statuses'] == []


def test_the_root_and_a_relative_dir_are_refused(run_module):
    for job_dir in ('/', 'srv/job'):
        result = run_module(extraction_status, {'job_dir': job_dir})
        assert result['failed'] and result['msg'].startswith('job_dir=')


def test_the_reports_are_the_filters_not_the_modules(run_module):
    result = run_module(extraction_status, {'job_dir': '/srv/job', 'reports': [{'host': 'ct1', 'statuses': []}]})
    assert result['failed'] and 'Unsupported parameters' in result['msg'] and 'reports' in result['msg']
