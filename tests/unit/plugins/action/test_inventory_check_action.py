"""inventory_check's dataset_hosts: the hosts extract.yml's dataset play runs on - those given a dataset, or
whose dataset refers to a fact not set yet (kept: it may be one)."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.action.inventory_check import _dataset_hosts


def test_the_hosts_given_a_dataset_in_inventory_order():
    values = {'ct1': {'extraction_job_dataset': '/data/train.jsonl'}, 'ct2': {'extraction_job_dataset': ''},
              'ct3': {}, 'ct4': {'extraction_job_dataset': '/data/train.jsonl'}}
    assert _dataset_hosts(['ct1', 'ct2', 'ct3', 'ct4'], values, []) == ['ct1', 'ct4']


def test_a_dataset_not_resolved_yet_keeps_its_host():
    assert _dataset_hosts(['ct1', 'ct2'], {'ct1': {}, 'ct2': {}}, ['ct2 - extraction_job_dataset']) == ['ct2']


def test_no_dataset_no_host():
    assert _dataset_hosts(['ct1'], {'ct1': {'sglang_server_port': 8000}}, ['ct1 - sglang_server_python']) == []
