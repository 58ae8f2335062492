"""extraction_job_outcome: after extract.yml (re)starts the job's shard units, a shard whose job refuses
to start (no space, another dataset's output, a bad config) is named in extract.yml's output with its
reason and the fix, instead of "applied"; a shard that runs or completes passes; one still starting when
the time is up passes too (it is running). systemctl is faked; the status files are real."""

from __future__ import annotations

import json

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import extraction_job_outcome

SPACE = 'refused to start: the shard still has 30 samples ... but /srv/x/shard-0-of-1 has 0.1 GiB free'


@pytest.fixture
def units(monkeypatch):
    """{unit: {ActiveState, MainPID, ExecMainStatus}} as the test sets them (a list: one per read)."""
    states = {}

    def properties(unit, props):
        now = states[unit]
        value = now.pop(0) if isinstance(now, list) and len(now) > 1 else (now[0] if isinstance(now, list) else now)
        return dict((name, str(value.get(name, ''))) for name in props)
    monkeypatch.setattr(extraction_job_outcome, 'unit_properties', properties)
    monkeypatch.setattr(extraction_job_outcome.time, 'sleep', lambda seconds: None)
    return states


def shard(tmp_path, index, status=None, log=None):
    out = tmp_path / ('out-%d' % index)
    config = tmp_path / ('j-shard-%d.json' % index)
    config.write_text(json.dumps({'output_dir': str(out)}))
    if status is not None:
        out.mkdir()
        (out / 'status.json').write_text(json.dumps(status))
    if log is not None:
        (tmp_path / ('j-shard-%d.log' % index)).write_text(log)
    return 'job@j-shard-%d.service' % index, str(config)


def run(run_module, tmp_path, shards, timeout=5):
    return run_module(extraction_job_outcome, dict(units=[u for u, c in shards], configs=[c for u, c in shards],
                                                   log_dir=str(tmp_path), timeout=timeout))


def test_a_refusal_fails_naming_the_shard_its_reason_and_the_fix(tmp_path, run_module, units):
    shards = [shard(tmp_path, 0, {'pid': 41, 'state': 'refused', 'last_errors': [SPACE]}),
              shard(tmp_path, 1, {'pid': 42, 'state': 'running', 'answered': 3})]
    units[shards[0][0]] = {'ActiveState': 'failed', 'MainPID': 0, 'ExecMainStatus': 2}
    units[shards[1][0]] = {'ActiveState': 'active', 'MainPID': 42}
    result = run(run_module, tmp_path, shards)
    assert result['failed'] and not result['changed']
    assert 'job@j-shard-0.service' in result['msg'] and SPACE in result['msg']
    assert 'job@j-shard-1.service' not in result['msg']
    assert 'extract.yml again' in result['msg']
    assert [s['outcome'] for s in result['shards']] == ['refused', 'sending']
    assert [s['shard'] for s in result['shards']] == ['shard-0', 'shard-1']


def test_sending_paused_and_complete_shards_pass_each_said(tmp_path, run_module, units):
    full = 'output disk full: /srv/x/shard-2-of-3: 0 B free, under the 8.0 GiB floor'
    shards = [shard(tmp_path, 0, {'pid': 7, 'state': 'complete', 'samples_done': 3, 'samples_total': 3}),
              shard(tmp_path, 1, {'pid': 8, 'state': 'running', 'answered': 1}),
              shard(tmp_path, 2, {'pid': 9, 'state': 'paused', 'paused': full})]
    units[shards[0][0]] = {'ActiveState': 'inactive', 'MainPID': 0, 'ExecMainStatus': 0}
    units[shards[1][0]] = {'ActiveState': 'active', 'MainPID': 8}
    units[shards[2][0]] = {'ActiveState': 'active', 'MainPID': 9}
    result = run(run_module, tmp_path, shards)
    assert not result.get('failed')
    assert [(s['outcome'], s['error']) for s in result['shards']] == [
        ('complete', ''), ('sending', ''), ('paused', full)]


def reads_then(monkeypatch, first, then):
    """The unit's properties: ``first`` read by read, then whatever ``then()`` makes (it may write a status)."""
    reads = iter(first)

    def properties(name, props):
        value = next(reads, None) or then()
        return dict((p, str(value.get(p, ''))) for p in props)
    monkeypatch.setattr(extraction_job_outcome, 'unit_properties', properties)


def test_running_is_not_past_the_start_until_the_server_answered(tmp_path, run_module, units, monkeypatch):
    """The job said running, then its first request met a refused key and it exited 2 seconds later: the
    play fails naming it (it said "applied" when it took running for past the start)."""
    key = 'job: the server refused the API key (401): check extraction_job_api_key'
    unit, config = shard(tmp_path, 0, {'pid': 9, 'state': 'running', 'answered': 0})

    def refused_later():
        (tmp_path / 'out-0' / 'status.json').write_text(json.dumps(
            {'pid': 9, 'state': 'failed', 'last_errors': [key]}))
        return {'ActiveState': 'failed', 'MainPID': 0, 'ExecMainStatus': 2}
    reads_then(monkeypatch, [{'ActiveState': 'active', 'MainPID': 9}] * 3, refused_later)
    result = run(run_module, tmp_path, [(unit, config)])
    assert result['failed'] and key in result['msg'] and 'job@j-shard-0.service failed' in result['msg']


def test_the_status_of_an_earlier_run_is_not_taken_for_this_one(tmp_path, run_module, units, monkeypatch):
    """The unit was started again: an old 'refused' status of another pid is waited past, until this
    start's job writes its own."""
    unit, config = shard(tmp_path, 0, {'pid': 5, 'state': 'refused', 'last_errors': [SPACE]})
    units[unit] = [{'ActiveState': 'active', 'MainPID': 9}, {'ActiveState': 'active', 'MainPID': 9}]

    def later():
        (tmp_path / 'out-0' / 'status.json').write_text(json.dumps({'pid': 9, 'state': 'running', 'answered': 2}))
        return {'ActiveState': 'active', 'MainPID': 9}
    reads_then(monkeypatch, [{'ActiveState': 'active', 'MainPID': 9}], later)
    result = run(run_module, tmp_path, [(unit, config)])
    assert not result.get('failed') and result['shards'][0]['outcome'] == 'sending'


def test_a_refusal_before_any_status_is_named_from_the_log(tmp_path, run_module, units):
    """A config the job refuses exits 2 before it writes a status: the log's last line says why."""
    unit, config = shard(tmp_path, 0, log='... INFO start\n... ERROR refused to start: api_key_file: unreadable\n')
    units[unit] = {'ActiveState': 'failed', 'MainPID': 0, 'ExecMainStatus': 2}
    result = run(run_module, tmp_path, [(unit, config)])
    assert result['failed'] and 'api_key_file: unreadable' in result['msg']


def test_a_shard_still_starting_when_the_time_is_up_passes(tmp_path, run_module, units, monkeypatch):
    clock = iter(range(0, 1000, 2))
    monkeypatch.setattr(extraction_job_outcome.time, 'monotonic', lambda: next(clock))
    unit, config = shard(tmp_path, 0)
    units[unit] = {'ActiveState': 'active', 'MainPID': 11}
    result = run(run_module, tmp_path, [(unit, config)], timeout=10)
    assert not result.get('failed') and result['shards'][0]['outcome'] == 'starting'


@pytest.mark.parametrize('args, says', [
    ({'units': ['a.service'], 'configs': [], 'log_dir': '/var/log/x'}, 'one per shard'),
    ({'units': [], 'configs': [], 'log_dir': '/var/log/x', 'timeout': -1}, 'timeout'),
])
def test_bad_options_are_refused(run_module, args, says):
    result = run_module(extraction_job_outcome, args)
    assert result['failed'] and says in result['msg']


STALL = 'waiting on the server for 900 s (sent 3, none answered)'


def test_a_stalled_shard_is_named_with_what_it_waited_on_and_fails_once_stopped_for_good(
        tmp_path, run_module, units):
    shards = [shard(tmp_path, 0, {'pid': 7, 'state': 'stalled', 'stalled': STALL, 'stall_final': True,
                                  'stall_restarts': 3, 'stall_restarts_max': 3}),
              shard(tmp_path, 1, {'pid': 8, 'state': 'stalled', 'stalled': STALL, 'stall_restarts': 0,
                                  'stall_restarts_max': 3})]
    units[shards[0][0]] = {'ActiveState': 'failed', 'MainPID': 0, 'ExecMainStatus': 4}
    units[shards[1][0]] = {'ActiveState': 'active', 'MainPID': 8}
    result = run(run_module, tmp_path, shards)
    assert result['failed']
    assert [s['outcome'] for s in result['shards']] == ['stalled for good', 'stalled']
    assert 'job@j-shard-0.service stalled for good: ' + STALL in result['msg']
    assert 'stopped after 3 restarts' in result['msg'] and 'j-shard-1' not in result['msg']
    assert 'restart 1 of 3' in result['shards'][1]['error']


def test_a_stall_restart_in_progress_is_stalled_not_starting_and_passes(tmp_path, run_module, units):
    shards = [shard(tmp_path, 0, {'pid': 7, 'state': 'stalled', 'stalled': STALL, 'stall_restarts': 1,
                                  'stall_restarts_max': 3})]
    units[shards[0][0]] = {'ActiveState': 'active', 'MainPID': 7}
    result = run(run_module, tmp_path, shards, timeout=0)
    assert not result.get('failed')
    assert result['shards'][0]['outcome'] == 'stalled' and STALL in result['shards'][0]['error']
