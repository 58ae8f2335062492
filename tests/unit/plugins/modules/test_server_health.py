"""server_health: ready on 200, died as soon as the unit fails, stops or is restarted by
systemd, starting after the timeout; the log lines it returns are this start's only, the
cause is recognised, and no API key in the log reaches the result."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import server_health


def run(args, capsys):
    args = dict({'unit': 'sglang-extraction.service', 'url': 'http://127.0.0.1:30000/health'}, **args)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            server_health.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def unit(monkeypatch):
    """A unit and a /health whose answers the test scripts: one entry used per look."""
    script = {'states': [('active', 'running', '0')], 'codes': [200], 'looks': 0}

    def props(name, properties=None):
        state = script['states'][min(script['looks'], len(script['states']) - 1)]
        return {'LoadState': 'not-found' if state[0] == 'inactive' and state[1] == 'dead' else 'loaded',
                'ActiveState': state[0], 'SubState': state[1], 'NRestarts': state[2]}

    def answer(url):
        code = script['codes'][min(script['looks'], len(script['codes']) - 1)]
        script['looks'] += 1
        return code

    monkeypatch.setattr(server_health, 'unit_properties', props)
    monkeypatch.setattr(server_health, 'health', answer)
    monkeypatch.setattr(server_health.time, 'sleep', lambda seconds: None)
    return script


def test_ready_when_health_answers_200(unit, capsys):
    unit['codes'] = [503, 503, 200]
    result = run({'timeout': 60}, capsys)
    assert result['state'] == 'ready' and result['http'] == 200 and not result['changed']
    assert unit['looks'] == 3


def test_starting_after_the_timeout(unit, capsys, monkeypatch):
    unit['codes'] = [503]
    ticks = iter(range(0, 1000, 10))
    monkeypatch.setattr(server_health.time, 'monotonic', lambda: next(ticks))
    result = run({'timeout': 30}, capsys)
    assert result['state'] == 'starting' and result['http'] == 503


@pytest.mark.parametrize('states', [
    [('failed', 'failed', '0')],
    [('active', 'running', '0'), ('activating', 'auto-restart', '0')],
    [('active', 'running', '0'), ('active', 'running', '3')],   # systemd restarted it in between
])
def test_died_when_the_unit_fails_or_restarts(unit, capsys, states):
    unit['states'] = states
    unit['codes'] = [503]
    result = run({'timeout': 60, 'restarts_before': 0}, capsys)
    assert result['state'] == 'died'


def test_one_look_reads_restarts_and_log_size(unit, capsys, tmp_path):
    unit['states'] = [('inactive', 'dead', '2')]
    log = tmp_path / 'server.log'
    log.write_text('old start\n')
    result = run({'log_file': str(log)}, capsys)
    assert result['restarts'] == 2 and result['log_size'] == len('old start\n')
    assert result['active_state'] == 'inactive'


@pytest.mark.parametrize('states, load_state', [
    ([('inactive', 'dead', '0')], 'not-found'),   # stop.yml stops nothing on a host without the unit
    ([('active', 'running', '0')], 'loaded'),
])
def test_one_look_says_whether_the_unit_exists(unit, capsys, states, load_state):
    unit['states'] = states
    result = run({}, capsys)
    assert result['load_state'] == load_state


@pytest.mark.parametrize('state, running', [
    (('active', 'running', '0'), True),
    (('activating', 'start', '0'), True),
    (('activating', 'auto-restart', '0'), True),   # systemd restarts it: it owns its port and GPUs
    (('reloading', 'reload', '0'), True),
    (('deactivating', 'stop-sigterm', '0'), False),
    (('failed', 'failed', '0'), False),
    (('inactive', 'dead', '0'), False),
])
def test_one_look_says_whether_the_unit_runs(unit, capsys, state, running):
    # the one answer the reclamation, extract.yml's GPU check and stop read (sglang_server_unit_state.running)
    unit['states'] = [state]
    assert run({}, capsys)['running'] is running


def test_tail_is_this_start_only_redacted_with_the_cause(unit, capsys, tmp_path):
    unit['states'] = [('failed', 'failed', '1')]
    log = tmp_path / 'server.log'
    old = 'old start: CUDA out of memory\n'
    log.write_text(old + "server_args=ServerArgs(port=30000, api_key='sk-secret-123')\n"
                   'OSError: [Errno 98] Address already in use\n')
    result = run({'log_file': str(log), 'log_offset': len(old), 'restarts_before': 1}, capsys)
    assert result['state'] == 'died'
    assert result['cause'] == 'the port is already in use (Address already in use)'
    assert result['newest'] == 'OSError: [Errno 98] Address already in use'
    assert len(result['tail']) == 2 and 'sk-secret-123' not in json.dumps(result)


@pytest.mark.parametrize('args, says', [
    ({'unit': 'sglang'}, 'unit='),
    ({'unit': 'a b.service'}, 'unit='),
    ({'unit': 'x.service\n'}, 'unit='),
    ({'url': 'file:///etc/passwd'}, 'url='),
    ({'url': 'http://host/health\nx'}, 'url='),
    ({'timeout': -1}, 'timeout='),
    ({'timeout': float('nan')}, 'timeout='),
    ({'timeout': 1e300}, 'timeout='),
    ({'log_offset': -5}, 'log_offset='),
])
def test_bad_options_are_refused(unit, args, says, capsys):
    result = run(args, capsys)
    assert result['failed'] and result['msg'].startswith(says) and unit['looks'] == 0
