"""online_training_status: how far the newest attempt got, from SpecForge's markers, counters and step lines, or
the reader's progress; which of the units runs."""

from __future__ import annotations

import json

import pytest

from ansible_collections.eagle3.extraction.plugins.modules import online_training_status

UNITS = ['eagle3-online-producer.service', 'eagle3-online-consumer.service']


@pytest.fixture
def units(monkeypatch):
    states = {unit: ('inactive', 'dead') for unit in UNITS}
    monkeypatch.setattr(online_training_status, 'unit_properties',
                        lambda unit, _props: dict(zip(('ActiveState', 'SubState'), states[unit])))
    return states


def _args(tmp_path, **extra):
    return dict({'control_root': str(tmp_path / 'control'), 'run_id': 'demo', 'output_dir': str(tmp_path / 'out'),
                 'units': UNITS}, **extra)


def _attempt(tmp_path, number=1):
    attempt = tmp_path / 'control' / 'demo' / ('attempt-%04d' % number)
    (attempt / 'control').mkdir(parents=True)
    return attempt


def test_no_attempt_is_not_started(tmp_path, run_module, units):
    result = run_module(online_training_status, _args(tmp_path))
    assert not result['changed'] and result['state'] == 'not-started' and result['attempt'] == 0
    assert result['units'][UNITS[0]] == 'inactive/dead'


def test_a_running_trainer_reports_its_last_step_and_the_channels_counts(tmp_path, run_module, units):
    _attempt(tmp_path, 1)
    attempt = _attempt(tmp_path, 2)
    (attempt / 'control' / 'refs.jsonl').write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n{"partial"')
    (attempt / 'control' / 'refs.jsonl.consumed_count').write_text('2')
    (attempt / 'consumer.log').write_text(
        "step 10: {'loss': 2.5, 'lr': 0.0001, 'perf/global_samples_per_second': 3.0}\n"
        "[rank0]: step 20: {'loss': 1.25, 'lr': 0.0001, 'perf/global_samples_per_second': 4.5}\nother line\n")
    units[UNITS[1]] = ('active', 'running')
    result = run_module(online_training_status, _args(tmp_path))
    assert (result['state'], result['attempt'], result['step'], result['loss'], result['samples_per_s']) == (
        'running', 2, 20, 1.25, 4.5)
    assert (result['published'], result['consumed']) == (3, 2)
    assert result['logs']['consumer'] == str(attempt / 'consumer.log')


def test_an_open_attempt_without_a_running_unit_is_stopped(tmp_path, run_module, units):
    _attempt(tmp_path)
    assert run_module(online_training_status, _args(tmp_path))['state'] == 'stopped'


def test_the_markers_say_finished_or_failed_with_the_reason(tmp_path, run_module, units):
    attempt = _attempt(tmp_path)
    (attempt / 'control' / 'refs.jsonl.consumer_done').write_text('')
    assert run_module(online_training_status, _args(tmp_path))['state'] == 'finished'
    # a producer stopped after the consumer finished: finished all the same
    (attempt / 'control' / 'refs.jsonl.failed').write_text('_WorkerTermination: 15')
    assert run_module(online_training_status, _args(tmp_path))['state'] == 'finished'
    (attempt / 'control' / 'refs.jsonl.consumer_done').unlink()
    result = run_module(online_training_status, _args(tmp_path))
    assert result['state'] == 'failed' and result['reason'] == '_WorkerTermination: 15'


def test_the_reader_reports_its_progress_and_no_step(tmp_path, run_module, units):
    _attempt(tmp_path, 1)
    attempt = _attempt(tmp_path, 2)
    (attempt / 'control' / 'refs.jsonl.consumed_count').write_text('7')
    (attempt / 'consumer.log').write_text("step 3: {'loss': 9.0}\n")   # not the reader's: never read
    # each attempt's reader has its own dir: the first attempt's progress is not the second's
    for number, rate in ((1, 9.5), (2, 2.5)):
        (tmp_path / 'out' / 'demo-reader' / ('attempt-%04d' % number)).mkdir(parents=True)
        (tmp_path / 'out' / 'demo-reader' / ('attempt-%04d' % number) / 'progress.json').write_text(
            json.dumps({'state': 'running', 'consumed': 7, 'samples_per_s': rate}))
    result = run_module(online_training_status, _args(tmp_path, consumer='reader', _ansible_check_mode=True))
    assert (result['consumed'], result['samples_per_s'], result['step'], result['loss']) == (7, 2.5, None, None)


@pytest.mark.parametrize('args, words', [
    ({'control_root': '/'}, 'control_root'),
    ({'run_id': '../x'}, 'run_id'),
    ({'units': ['x; rm']}, 'units'),
])
def test_bad_values_are_refused_naming_them(tmp_path, run_module, units, args, words):
    result = run_module(online_training_status, _args(tmp_path, **args))
    assert result['failed'] and words in result['msg']
