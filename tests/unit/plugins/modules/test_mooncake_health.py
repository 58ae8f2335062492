"""mooncake_health: up only when the master, the metadata server and the segment at the advertised address are;
the wait ends early when a unit stops; not up fails with what is not, unless require is off; bad values refused."""

from __future__ import annotations

import json
import pathlib

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import mooncake_health

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / 'fixtures' / 'mooncake'
MIB = 1 << 20
ARGS = {'metrics_url': 'http://127.0.0.1:35903', 'metadata_server': 'http://127.0.0.1:35880/metadata',
        'segment_bytes': 64 * MIB, 'advertised': '127.0.0.1'}
DESCRIPTOR = json.dumps({'name': '127.0.0.1:13831', 'tcp_data_host': '127.0.0.1'}).encode()


@pytest.fixture
def store(monkeypatch):
    """The master's answers, scripted: metrics bodies by look, the metadata answer, units' states."""
    script = {'metrics': [(200, (FIXTURES / 'metrics_three_keys.txt').read_bytes())], 'metadata': (200, DESCRIPTOR),
              'active': 'active', 'looks': 0, 'asked': []}

    def get(url, timeout=5, limit=1):
        script['asked'].append(url)
        if url.endswith('/metrics'):
            answer = script['metrics'][min(script['looks'], len(script['metrics']) - 1)]
            script['looks'] += 1
            return answer
        return script['metadata']

    monkeypatch.setattr(mooncake_health, 'get', get)
    monkeypatch.setattr(mooncake_health, 'unit_properties',
                        lambda unit, props: {'ActiveState': script['active'], 'SubState': 'x'})
    monkeypatch.setattr(mooncake_health.time, 'sleep', lambda seconds: None)
    return script


def test_up_returns_the_numbers_and_asks_for_the_holders_descriptor(store, run_module):
    result = run_module(mooncake_health, dict(ARGS, _ansible_check_mode=True))
    assert result['up'] and result['mounted'] and not result['changed']
    assert (result['capacity_bytes'], result['allocated_bytes'], result['key_count']) == (64 * MIB, 3 * MIB, 3)
    assert result['data_host'] == '127.0.0.1'
    assert 'http://127.0.0.1:35880/metadata?key=mooncake%2Fram%2F127.0.0.1%3A13831' in store['asked']


def test_the_wait_ends_when_the_segment_is_mounted(store, run_module):
    store['metrics'] = [(None, b''), (200, (FIXTURES / 'metrics_no_segment.txt').read_bytes()),
                        (200, (FIXTURES / 'metrics_three_keys.txt').read_bytes())]
    result = run_module(mooncake_health, dict(ARGS, timeout=60))
    assert result['up'] and store['looks'] == 3


def test_a_master_that_does_not_answer_fails_naming_it(store, run_module):
    store['metrics'] = [(None, b'')]
    result = run_module(mooncake_health, ARGS)
    assert result['failed'] and 'does not answer at http://127.0.0.1:35903/metrics' in result['msg']
    assert not result['master']


def test_no_segment_fails_with_the_segment_unit_and_require_false_only_reports(store, run_module):
    store['metrics'] = [(200, (FIXTURES / 'metrics_no_segment.txt').read_bytes())]
    result = run_module(mooncake_health, ARGS)
    assert result['failed'] and 'eagle3-mooncake-segment.service' in result['msg']
    result = run_module(mooncake_health, dict(ARGS, require=False))
    assert not result.get('failed') and not result['up'] and result['problems']


def test_a_silent_metadata_server_is_not_up(store, run_module):
    store['metadata'] = (None, b'')
    result = run_module(mooncake_health, ARGS)
    assert result['failed'] and 'metadata server does not answer' in result['msg']


def test_a_stopped_unit_ends_the_wait_at_once_naming_it(store, run_module):
    store['metrics'] = [(None, b'')]
    store['active'] = 'failed'
    result = run_module(mooncake_health, dict(ARGS, timeout=3600, units=['eagle3-mooncake-master.service']))
    assert result['failed'] and store['looks'] == 1
    assert 'eagle3-mooncake-master.service is failed/x (journalctl -u eagle3-mooncake-master.service)' in result['msg']


@pytest.mark.parametrize('bad', [{'metrics_url': 'ftp://x'}, {'metadata_server': 'http://a b/metadata'},
                                 {'segment_bytes': -1}, {'advertised': 'a;b'}, {'units': ['x\n.service']},
                                 {'timeout': float('inf')}, {'timeout': 3601}])
def test_bad_values_are_refused_before_any_look(store, run_module, bad):
    result = run_module(mooncake_health, dict(ARGS, **bad))
    assert result['failed'] and store['asked'] == [] and list(bad)[0] in result['msg']
