"""mooncake_metrics: the numbers of a real master's metrics text (captured from mooncake_master 0.3.13.post1 with a
64 MiB segment and three 1 MiB keys, and before any segment was mounted), and the verdict on them."""

from __future__ import annotations

import pathlib

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils.mooncake_metrics import (
    MetricsError, holder, problems, samples, segment_host, usage)

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / 'fixtures' / 'mooncake'
MIB = 1 << 20


def text(name):
    return (FIXTURES / name).read_text()


def test_a_real_masters_metrics_give_its_capacity_allocation_keys_and_segment():
    found = usage(text('metrics_three_keys.txt'))
    assert found['capacity_bytes'] == 64 * MIB
    assert found['allocated_bytes'] == 3 * MIB
    assert found['key_count'] == 3
    assert found['active_clients'] == 1
    assert found['segments'] == [{'name': '127.0.0.1:13831', 'capacity_bytes': 64 * MIB, 'allocated_bytes': 3 * MIB}]


def test_before_the_segment_is_mounted_the_master_holds_nothing():
    found = usage(text('metrics_no_segment.txt'))
    assert (found['capacity_bytes'], found['key_count'], found['segments']) == (0, 0, [])
    assert problems(found, 64 * MIB)[0].startswith('the global segment is not mounted')


def test_labels_with_escapes_and_timestamps_are_read():
    found = samples('# HELP x y\n\nm{a="q\\"uote",b="x y"} 1.5e3 1700000000\nn 2\n')
    assert found == [('m', {'a': 'q"uote', 'b': 'x y'}, 1500.0), ('n', {}, 2.0)]


@pytest.mark.parametrize('body', ['<html>not found</html>', 'master_key_count one', ''])
def test_a_text_that_is_not_a_masters_metrics_is_refused(body):
    with pytest.raises(MetricsError):
        usage(body)


def test_a_metric_the_master_always_reports_missing_is_named():
    with pytest.raises(MetricsError, match='master_key_count'):
        usage('master_total_capacity_bytes 1\nmaster_allocated_bytes 0\nmaster_active_clients 0\n')


def test_the_store_is_up_when_the_segment_at_the_advertised_address_advertises_it():
    found = usage(text('metrics_three_keys.txt'))
    assert problems(found, 64 * MIB, '127.0.0.1', '127.0.0.1') == []
    assert problems(found, 64 * MIB) == []


def test_a_segment_bigger_than_mounted_is_not_up():
    found = usage(text('metrics_three_keys.txt'))
    assert 'not mounted' in problems(found, 64 * MIB + 1)[0]


def test_a_segment_advertising_a_bridge_address_is_named_with_the_800_trap():
    found = usage(text('metrics_three_keys.txt'))
    reason = problems(found, 64 * MIB, '10.0.0.5', '10.0.0.5')
    assert len(reason) == 1 and '127.0.0.1:13831' in reason[0] and '-800' in reason[0]
    reason = problems(found, 64 * MIB, '127.0.0.1', '172.17.0.2')
    assert 'advertises 172.17.0.2' in reason[0] and '-800' in reason[0]
    assert 'no descriptor' in problems(found, 64 * MIB, '127.0.0.1', None)[0]


def test_the_holder_is_the_largest_segment_of_the_advertised_host():
    found = {'segments': [{'name': '10.0.0.5:1', 'capacity_bytes': 1}, {'name': '10.0.0.5:2', 'capacity_bytes': 9},
                          {'name': '10.0.0.6:3', 'capacity_bytes': 99}]}
    assert holder(found, '10.0.0.5')['name'] == '10.0.0.5:2'
    assert holder(found, '10.0.0.7') is None
    assert segment_host('[::1]:5') == '::1'
