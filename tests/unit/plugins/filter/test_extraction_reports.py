"""extraction_status_table and extraction_verify_union: the controller's half of status.yml and verify.yml,
filters over the reports the modules extraction_status and extraction_verify return on each host (the
modules run on the hosts only). A report that is not one is refused, naming it."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.extraction_reports import (
    FilterModule, extraction_status_table, extraction_verify_union)
from ansible_collections.eagle3.extraction.plugins.module_utils.verify_union import PROBLEMS_SHOWN

STATUS = {'shard_index': 0, 'shard_count': 2, 'state': 'running', 'alive': True, 'samples_done': 3,
          'samples_total': 8, 'errors': 0}


def shard(index, ids, complete=True, problems=()):
    return {'shard_dir': '/srv/j/shard-%d-of-2' % index, 'ids': list(ids), 'samples': len(ids), 'tokens': 2 * len(ids),
            'bytes': 10 * len(ids), 'problems': list(problems), 'meta': {'dataset_sha256': 'd', 'shard_count': '2',
                                                                         'shard_index': str(index)},
            'card': {'complete': complete}, 'bad_lines': 0, 'bad_lines_shown': []}


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'extraction_status_table', 'extraction_verify_union'}


def test_one_table_of_every_hosts_shards_with_an_unreachable_host():
    table = extraction_status_table([{'host': 'ct1', 'statuses': [STATUS]},
                                     {'host': 'ct2', 'statuses': [dict(STATUS, shard_index=1)]},
                                     {'host': 'ct3', 'error': 'Failed to connect to the host via ssh'}])
    assert [line.split()[0] for line in table['lines']] == ['HOST', 'ct1', 'ct2', 'ct3', 'TOTAL']
    assert 'unreachable: Failed to connect' in table['lines'][3]
    assert table['totals']['samples_done'] == 6 and table['totals']['eta_s'] is None


def test_every_sample_once_is_one_line_to_print():
    union = extraction_verify_union([{'host': 'ct1', 'shards': [shard(0, ['a', 'b'])]},
                                     {'host': 'ct2', 'shards': [shard(1, ['c'])]}])
    assert union['problems'] == [] and union['msg'] == 'verified: 3 samples exactly once, 6 tokens, 30 bytes'


def test_problems_are_counted_and_the_first_named_with_their_host():
    many = ['f%02d: a partial file' % n for n in range(PROBLEMS_SHOWN + 5)]
    union = extraction_verify_union([{'host': 'ct1', 'shards': [shard(0, ['a'], problems=many)]},
                                     {'host': 'ct2', 'shards': [shard(1, ['a'])]}])
    assert len(union['problems']) == PROBLEMS_SHOWN + 6
    assert union['msg'].startswith('%d problem(s): ct1: f00: a partial file; ' % (PROBLEMS_SHOWN + 6))
    assert union['msg'].count('; ') == PROBLEMS_SHOWN - 1 and 'is stored twice' not in union['msg']
    assert any(p.startswith('a is stored twice: ct1:') for p in union['problems'])


@pytest.mark.parametrize('reports, says', [
    ({'host': 'ct1'}, 'a list of reports'),
    ([{'host': 'ct1'}], 'reports[0]: expected {host, statuses} or {host, error}'),
    ([{'statuses': []}], 'reports[0]'),
    (['ct1'], 'reports[0]'),
])
def test_a_status_report_that_is_not_one_is_refused_naming_it(reports, says):
    with pytest.raises(AnsibleFilterError, match=r'^extraction_status_table: .*' + re.escape(says)):
        extraction_status_table(reports)


@pytest.mark.parametrize('reports, says', [
    ([{'host': 'ct1', 'shards': []}, {'host': 'ct2'}], 'reports[1]: expected {host, shards}'),
    ([{'host': 7, 'shards': []}], 'reports[0]'),
])
def test_a_verify_report_that_is_not_one_is_refused_naming_it(reports, says):
    with pytest.raises(AnsibleFilterError, match=r'^extraction_verify_union: .*' + re.escape(says)):
        extraction_verify_union(reports)
