"""online_training_attempt: a new attempt after a failed or stopped one (SpecForge never resumes a producer), the
open attempt kept with the consumer resuming from its newest checkpoint, a finished run left alone."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.modules import online_training_attempt


def _args(tmp_path, **extra):
    return dict({'control_root': str(tmp_path / 'control'), 'run_id': 'demo',
                 'output_dir': str(tmp_path / 'out')}, **extra)


def _mark(result, suffix, text=''):
    with open(result['control_dir'] + '/refs.jsonl' + suffix, 'w', encoding='utf-8') as stream:
        stream.write(text)


def test_the_first_run_makes_attempt_one(tmp_path, run_module):
    result = run_module(online_training_attempt, _args(tmp_path))
    assert result['changed'] and result['action'] == 'start' and result['attempt'] == 1
    assert (tmp_path / 'control/demo/attempt-0001/control').is_dir()
    assert (tmp_path / 'control/demo/attempt-0001/consumer-state').is_dir()
    assert result['resume_from'] == '' and result['draft_checkpoint'] == ''


def test_check_mode_makes_nothing(tmp_path, run_module):
    result = run_module(online_training_attempt, _args(tmp_path, _ansible_check_mode=True))
    assert result['changed'] and not (tmp_path / 'control').exists()


def test_an_open_attempt_goes_on_and_the_consumer_resumes_from_its_newest_checkpoint(tmp_path, run_module):
    first = run_module(online_training_attempt, _args(tmp_path))
    for step in (2, 10, 4):
        (tmp_path / 'out' / ('demo-step%d' % step)).mkdir(parents=True)
    (tmp_path / 'out' / 'other-step99').mkdir()
    again = run_module(online_training_attempt, _args(tmp_path))
    assert not again['changed'] and again['action'] == 'continue'
    assert again['control_dir'] == first['control_dir']
    assert again['resume_from'] == str(tmp_path / 'out' / 'demo-step10')


def test_a_failed_attempt_gives_a_fresh_one_starting_from_the_last_weights(tmp_path, run_module):
    first = run_module(online_training_attempt, _args(tmp_path))
    _mark(first, '.failed', '_WorkerTermination: 15')
    (tmp_path / 'out' / 'demo-step5').mkdir(parents=True)
    second = run_module(online_training_attempt, _args(tmp_path))
    assert second['changed'] and second['action'] == 'start' and second['attempt'] == 2
    assert second['previous_state'] == 'failed' and 'WorkerTermination' in second['previous_reason']
    assert second['draft_checkpoint'] == str(tmp_path / 'out' / 'demo-step5') and second['resume_from'] == ''


def test_a_finished_run_starts_nothing_unless_asked(tmp_path, run_module):
    first = run_module(online_training_attempt, _args(tmp_path))
    _mark(first, '.consumer_done')
    again = run_module(online_training_attempt, _args(tmp_path))
    assert not again['changed'] and again['action'] == 'none' and again['attempt'] == 1
    restarted = run_module(online_training_attempt, _args(tmp_path, restart=True))
    assert restarted['action'] == 'start' and restarted['attempt'] == 2


def test_a_consumer_failure_outranks_its_done_marker(tmp_path, run_module):
    first = run_module(online_training_attempt, _args(tmp_path))
    _mark(first, '.consumer_done')
    _mark(first, '.consumer_failed', 'RuntimeError: boom')
    assert run_module(online_training_attempt, _args(tmp_path))['action'] == 'start'


def test_a_producer_stopped_after_the_consumer_finished_leaves_the_run_finished(tmp_path, run_module):
    # a reboot or stop.yml just after the end: the producer, still up, writes .failed on SIGTERM (seen on the fleet)
    first = run_module(online_training_attempt, _args(tmp_path))
    _mark(first, '.consumer_done')
    _mark(first, '.failed', '_WorkerTermination: 15')
    again = run_module(online_training_attempt, _args(tmp_path))
    assert not again['changed'] and again['action'] == 'none' and again['attempt'] == 1


def test_bad_paths_and_run_ids_are_refused(tmp_path, run_module):
    for bad in ({'control_root': '/'}, {'output_dir': 'rel/out'}, {'run_id': '../x'}, {'run_id': 'a\nb'}):
        result = run_module(online_training_attempt, _args(tmp_path, **bad))
        assert result['failed'] and not (tmp_path / 'control').exists()
