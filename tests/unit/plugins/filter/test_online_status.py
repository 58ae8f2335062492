"""online_status: the lines status.yml prints of an online job, each part shown or said to be unreadable."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.filter.online_status import online_status

TRAINING = {'state': 'running', 'attempt': 2, 'step': 40, 'loss': 1.5, 'samples_per_s': 12.9, 'published': 120,
            'consumed': 110, 'reason': ''}
STORE = {'up': True, 'allocated_bytes': 3 << 20, 'capacity_bytes': 512 << 20, 'key_count': 50, 'problems': []}


def test_training_store_and_each_gateway_are_shown():
    gateways = [{'item': 'http://10.200.0.101:30100', 'json': {'prompts_served': 64, 'prompts_failed': 1,
                                                               'prompts_in_flight': 2, 'bytes_put': 5 << 20,
                                                               'mooncake_ready': True}},
                {'item': 'http://10.200.0.102:30100', 'msg': 'Connection refused', 'status': -1}]
    lines = online_status(TRAINING, store=STORE, gateways=gateways)
    assert lines[1].split() == ['running', '2', '40', '1.5', '12.9', '120', '110']
    assert lines[4].split() == ['up', '3.00', 'MiB', '512.00', 'MiB', '50']
    assert lines[7].split() == ['http://10.200.0.101:30100', '64', '1', '2', '5.00', 'MiB', 'ready']
    assert lines[8].split()[:3] == ['http://10.200.0.102:30100', 'UNREACHABLE:', 'Connection']


def test_a_failed_training_and_a_store_down_say_why():
    lines = online_status(dict(TRAINING, state='failed', reason='ValueError: ids',
                               units={'eagle3-online-consumer.service': 'failed/failed',
                                      'eagle3-online-producer.service': 'inactive/dead'}),
                          store={'up': False, 'problems': ['the master does not answer']})
    assert lines[1].startswith('failed (ValueError: ids)')
    # the attempt is over: its units do not restart it, the next extract.yml starts a new one
    assert lines[2] == ('attempt 2 failed (ValueError: ids); units: eagle3-online-consumer.service failed/failed, '
                        'eagle3-online-producer.service inactive/dead. Re-running extract.yml starts attempt 3 '
                        '(every prompt again).')
    assert lines[5].startswith('DOWN: the master does not answer')


def test_an_open_attempt_that_no_unit_runs_says_a_rerun_goes_on():
    lines = online_status(dict(TRAINING, state='stopped', units={'eagle3-online-producer.service': 'inactive/dead'}))
    assert lines[2].startswith('attempt 2 is open but no unit runs') and lines[2].endswith('goes on with it.')
