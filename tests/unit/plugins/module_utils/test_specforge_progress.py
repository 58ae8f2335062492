"""specforge_progress: the consumer's last printed step (loss, lr, samples/s) and the ref channel's counters."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.specforge_progress import channel_counts, last_step


def test_the_last_step_line_wins_and_other_lines_are_ignored(tmp_path):
    log = tmp_path / 'consumer.log'
    log.write_text(
        "step 1: {'loss': 9.5, 'lr': 1e-05, 'perf/global_samples_per_second': 2.0}\n"
        "I1206 06:15:27 some mooncake line\n"
        "[rank0]: step 2: {'loss': 8.25, 'lr': 2e-05, 'perf/global_samples_per_second': 4.5, 'acc': [0.1, 0.2]}\n"
        "step 3: {'loss': broken\n")
    assert last_step(str(log)) == {'step': 2, 'loss': 8.25, 'lr': 2e-05, 'samples_per_s': 4.5}


def test_no_log_or_no_step_yet_is_empty(tmp_path):
    assert last_step(str(tmp_path / 'none.log')) == {}
    (tmp_path / 'early.log').write_text('[producer-timing] enter\n')
    assert last_step(str(tmp_path / 'early.log')) == {}


def test_channel_counts_only_whole_lines(tmp_path):
    (tmp_path / 'refs.jsonl').write_text('{"a": 1}\n{"b": 2}\n{"c": ')
    (tmp_path / 'refs.jsonl.consumed_count').write_text('1')
    assert channel_counts(str(tmp_path)) == {'published': 2, 'consumed': 1}
    assert channel_counts(str(tmp_path / 'missing')) == {'published': 0, 'consumed': 0}
