"""extraction_job_dataset: a dataset changed under the same job name is refused once, for the whole
job, before any shard starts - whichever shards opened their manifest with the old one and whichever
never did. On a host it reads what each shard's manifest was started with (and hashes a dataset that is
on the host); on the controller it compares every host's. In-process, with real sqlite manifests."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import extraction_job_dataset

OLD = 'a' * 64
NEW = 'b' * 64


def manifest(shard_dir, sha):
    """A shard output dir whose manifest the job pinned to the dataset ``sha`` (None: opened, not pinned)."""
    shard_dir.mkdir(parents=True)
    db = sqlite3.connect(str(shard_dir / 'manifest.sqlite'))
    db.execute('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
    db.execute('PRAGMA journal_mode=WAL')
    if sha:
        db.executemany('INSERT INTO meta VALUES (?, ?)', [('job', 'demo'), ('dataset_sha256', sha)])
    db.commit()
    db.close()


def on_host(run_module, job_dir, **args):
    return run_module(extraction_job_dataset, dict(dict(host='ct1', job='demo', dataset='/data/demo.jsonl',
                                                        job_dir=str(job_dir)), **args))


def compare(run_module, reports):
    return run_module(extraction_job_dataset, dict(reports=reports))


def report(host, sha, pinned=None, job='demo', dataset='/data/demo.jsonl'):
    return dict(host=host, job=job, dataset=dataset, sha256=sha, pinned=pinned or {})


def test_the_host_reads_what_each_shard_was_started_with(tmp_path, run_module):
    job_dir = tmp_path / 'demo'
    manifest(job_dir / 'shard-0-of-3', OLD)
    manifest(job_dir / 'shard-2-of-3', None)            # its job refused before pinning
    (job_dir / 'shard-1-of-3').mkdir()                  # its job never opened a manifest
    result = on_host(run_module, job_dir, dataset_sha256=NEW)
    assert not result['changed'] and not result.get('failed')
    assert result['report'] == report('ct1', NEW, {'shard-0-of-3': OLD})


def test_a_dataset_on_the_host_is_hashed_there_and_a_missing_job_dir_pinned_nothing(tmp_path, run_module):
    data = tmp_path / 'demo.jsonl'
    data.write_bytes(b'{"id": "1", "input_ids": [1], "loss_mask": [1]}\n')
    result = on_host(run_module, tmp_path / 'none', dataset=str(data), hash_dataset=True)
    assert result['report'] == report('ct1', hashlib.sha256(data.read_bytes()).hexdigest(), dataset=str(data))


def test_a_manifest_that_is_not_a_database_is_named(tmp_path, run_module):
    (tmp_path / 'demo' / 'shard-0-of-1').mkdir(parents=True)
    (tmp_path / 'demo' / 'shard-0-of-1' / 'manifest.sqlite').write_text('not sqlite')
    result = on_host(run_module, tmp_path / 'demo', dataset_sha256=NEW)
    assert result['failed'] and 'shard-0-of-1/manifest.sqlite' in result['msg']


def test_the_same_dataset_everywhere_passes(run_module):
    result = compare(run_module, [report('ct1', OLD, {'shard-0-of-3': OLD}), report('ct2', OLD),
                                  report('ct3', OLD, {'shard-2-of-3': OLD})])
    assert not result.get('failed') and not result['changed']


def test_a_changed_dataset_is_refused_for_the_whole_job_naming_it(run_module):
    """ct1's shard was started with the old dataset; ct2's never pinned one and would take the new one:
    both are refused, once, with the fix."""
    result = compare(run_module, [report('ct1', NEW, {'shard-0-of-2': OLD}), report('ct2', NEW)])
    assert result['failed']
    msg = result['msg']
    assert msg.count("job 'demo'") == 1
    assert '/data/demo.jsonl' in msg and NEW[:12] in msg and OLD[:12] in msg
    assert 'shard-0-of-2 on ct1' in msg and 'ct2' in msg
    assert 'extraction_job_name' in msg and 'restore the dataset' in msg.lower() and 'nothing was started' in msg.lower()


def test_two_datasets_under_one_job_name_are_refused_before_any_shard_pinned(run_module):
    result = compare(run_module, [report('ct1', OLD), report('ct2', NEW, dataset='/data/other.jsonl')])
    assert result['failed'] and '/data/other.jsonl' in result['msg'] and 'ct1' in result['msg']


def test_jobs_of_other_names_are_apart(run_module):
    result = compare(run_module, [report('ct1', OLD, {'shard-0-of-1': OLD}),
                                  report('ct2', NEW, {'shard-0-of-1': NEW}, job='other')])
    assert not result.get('failed')


@pytest.mark.parametrize('args, says', [
    ({'job_dir': 'relative', 'host': 'h', 'job': 'j', 'dataset': '/d', 'dataset_sha256': OLD}, 'job_dir'),
    ({'job_dir': '/x', 'host': 'h', 'job': 'j', 'dataset': '/d'}, "'/d': no sha256"),
    ({'job_dir': '/x', 'host': 'h', 'job': 'j', 'dataset': '/d', 'dataset_sha256': 'short'}, 'dataset_sha256'),
    ({'reports': [{'host': 'h'}]}, 'reports[0]'),
])
def test_bad_options_are_refused(run_module, args, says):
    result = run_module(extraction_job_dataset, args)
    assert result['failed'] and says in result['msg']


def test_job_dir_needs_the_host_the_job_and_the_dataset(tmp_path, run_module):
    """AnsibleModule's required_by names what is missing; a given but empty one is refused too."""
    missing = run_module(extraction_job_dataset, dict(job_dir=str(tmp_path), host='ct1'))
    assert missing['failed'] and "missing parameter(s) required by 'job_dir': job, dataset" in missing['msg']
    empty = on_host(run_module, tmp_path, job='')
    assert empty['failed'] and empty['msg'] == 'with job_dir, job must not be empty'
