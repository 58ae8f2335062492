# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shard's Prometheus textfile (metrics.py): its exact text, its labels escaped, an unknown ETA
absent, the state one-hot, the file replaced atomically, a failed write that does not stop the job;
and the whole job writing it, equal to status.json at the end."""
import asyncio
import json
import os
import re
import shutil
import subprocess

import pytest

from job_helpers import StandinServer, config_for, make_samples, torch, write_dataset
from eagle3_extraction_job import job as jobmod
from eagle3_extraction_job import metrics

SNAPSHOT = {
    "job": "demo", "host": "host1", "state": "running", "shard_index": 1, "shard_count": 4,
    "samples_total": 100, "samples_done": 40, "samples_failed": 2, "bad_lines": 3,
    "tokens_total": 5000, "tokens_done": 2000, "bytes_done": 123456789, "tokens_per_s": 12.5, "eta_s": 240,
    "shm_used_bytes": 1024, "shm_total_bytes": 4096, "output_free_bytes": 10 ** 12, "errors": 5,
    "stall_restarts_total": 1, "started_at": 1700000000.5, "updated_at": 1700000100.25,
}
EXTRA = {"shm_high_watermark_bytes": 2867, "output_floor_bytes": 8589934592, "last_durable_at": 1700000099.75}
LABELS = 'extraction_job="demo",shard="1",shard_count="4"'

EXPECTED = """\
# HELP eagle3_job_samples Samples in the shard.
# TYPE eagle3_job_samples gauge
eagle3_job_samples{L} 100
# HELP eagle3_job_samples_done Samples durable (status.json samples_done).
# TYPE eagle3_job_samples_done gauge
eagle3_job_samples_done{L} 40
# HELP eagle3_job_samples_failed Samples whose last try failed.
# TYPE eagle3_job_samples_failed gauge
eagle3_job_samples_failed{L} 2
# HELP eagle3_job_bad_lines The dataset's bad lines this shard counts.
# TYPE eagle3_job_bad_lines gauge
eagle3_job_bad_lines{L} 3
# HELP eagle3_job_tokens Tokens in the shard.
# TYPE eagle3_job_tokens gauge
eagle3_job_tokens{L} 5000
# HELP eagle3_job_tokens_done Tokens durable.
# TYPE eagle3_job_tokens_done gauge
eagle3_job_tokens_done{L} 2000
# HELP eagle3_job_bytes_done Bytes durable.
# TYPE eagle3_job_bytes_done gauge
eagle3_job_bytes_done{L} 123456789
# HELP eagle3_job_tokens_per_second Tokens made durable a second, over the last two minutes.
# TYPE eagle3_job_tokens_per_second gauge
eagle3_job_tokens_per_second{L} 12.5
# HELP eagle3_job_eta_seconds Seconds until the shard is done at the current rate (absent when unknown).
# TYPE eagle3_job_eta_seconds gauge
eagle3_job_eta_seconds{L} 240
# HELP eagle3_job_started_timestamp_seconds When this run of the job's process started (unix time).
# TYPE eagle3_job_started_timestamp_seconds gauge
eagle3_job_started_timestamp_seconds{L} 1700000000.5
# HELP eagle3_job_last_durable_sample_timestamp_seconds When this process last made a sample durable (unix time); \
the process start until the first.
# TYPE eagle3_job_last_durable_sample_timestamp_seconds gauge
eagle3_job_last_durable_sample_timestamp_seconds{L} 1700000099.75
# HELP eagle3_job_shm_used_bytes Bytes in use on the dump dir's filesystem (/dev/shm).
# TYPE eagle3_job_shm_used_bytes gauge
eagle3_job_shm_used_bytes{L} 1024
# HELP eagle3_job_shm_size_bytes Size of the dump dir's filesystem (/dev/shm).
# TYPE eagle3_job_shm_size_bytes gauge
eagle3_job_shm_size_bytes{L} 4096
# HELP eagle3_job_shm_high_watermark_bytes The dump dir's high watermark: no request goes while /dev/shm is above it.
# TYPE eagle3_job_shm_high_watermark_bytes gauge
eagle3_job_shm_high_watermark_bytes{L} 2867
# HELP eagle3_job_output_free_bytes Bytes free on the output disk.
# TYPE eagle3_job_output_free_bytes gauge
eagle3_job_output_free_bytes{L} 1000000000000
# HELP eagle3_job_output_floor_bytes The output disk's floor: the job pauses while less is free.
# TYPE eagle3_job_output_floor_bytes gauge
eagle3_job_output_floor_bytes{L} 8589934592
# HELP eagle3_job_errors Errors the job logged (status.json errors), drain errors included.
# TYPE eagle3_job_errors gauge
eagle3_job_errors{L} 5
# HELP eagle3_job_restarts Restarts after a stall, in all (status.json stall_restarts_total).
# TYPE eagle3_job_restarts gauge
eagle3_job_restarts{L} 1
# HELP eagle3_job_state 1 for the shard's current state, 0 for every other state of the job.
# TYPE eagle3_job_state gauge
eagle3_job_state{S="starting"} 0
eagle3_job_state{S="draining"} 0
eagle3_job_state{S="running"} 1
eagle3_job_state{S="paused"} 0
eagle3_job_state{S="stalled"} 0
eagle3_job_state{S="complete"} 0
eagle3_job_state{S="incomplete"} 0
eagle3_job_state{S="failed"} 0
eagle3_job_state{S="refused"} 0
eagle3_job_state{S="capture_mismatch"} 0
eagle3_job_state{S="capture_check_unavailable"} 0
# HELP eagle3_job_metrics_updated_timestamp_seconds When this file was written (unix time).
# TYPE eagle3_job_metrics_updated_timestamp_seconds gauge
eagle3_job_metrics_updated_timestamp_seconds{L} 1700000101.0
""".replace("{L}", "{" + LABELS + "}").replace("{S=", "{" + LABELS + ",state=")

# a sample line of the text format: name, labels, value (no timestamp)
SAMPLE_LINE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\} '
                         r'(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse(text):
    """{(name, ((label, value), ...)): value} of a text-format file; fails on any line it cannot read."""
    found = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.fullmatch(r"# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+", line), line
            continue
        match = SAMPLE_LINE.fullmatch(line)
        assert match, line
        labels = tuple(LABEL.findall(match.group(2)))
        key = (match.group(1), labels)
        assert key not in found, f"a series twice: {key}"
        found[key] = float(match.group(3))
    return found


def value(found, name, **labels):
    matching = [v for (n, ls), v in found.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items())]
    assert len(matching) == 1, (name, labels, matching)
    return matching[0]


def test_the_text_is_every_series_of_the_contract_with_the_shards_labels():
    text = metrics.render(SNAPSHOT, EXTRA, 1700000101.0)
    assert text == EXPECTED
    assert len(parse(text)) == text.count("\n") - 2 * text.count("# HELP")


@pytest.mark.skipif(not shutil.which("promtool"), reason="no promtool on this machine")
def test_promtool_reads_the_text_without_a_complaint():
    result = subprocess.run(["promtool", "check", "metrics"], input=metrics.render(SNAPSHOT, EXTRA, 1.0),
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_label_value_with_quotes_backslashes_and_a_newline_is_escaped():
    assert metrics.escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    # a state the list does not know, with every character the format escapes: read back whole
    text = metrics.render(dict(SNAPSHOT, state='odd "state"\\\n'), EXTRA, 1.0)
    found = parse(text)
    assert value(found, "eagle3_job_state", state='odd \\"state\\"\\\\\\n') == 1
    assert sum(v for (n, _l), v in found.items() if n == "eagle3_job_state") == 1


def test_an_unknown_eta_is_no_series_not_a_zero():
    found = parse(metrics.render(dict(SNAPSHOT, eta_s=None), EXTRA, 1.0))
    assert not [n for n, _l in found if n == "eagle3_job_eta_seconds"]
    # and a known 0 (the shard is done) is one
    assert value(parse(metrics.render(dict(SNAPSHOT, eta_s=0), EXTRA, 1.0)), "eagle3_job_eta_seconds") == 0


@pytest.mark.parametrize("state, named", [("draining leftovers", "draining"), ("paused", "paused"),
                                          ("stalled", "stalled"), ("complete", "complete"),
                                          ("capture_mismatch", "capture_mismatch")])
def test_the_state_is_one_hot_under_the_status_tables_name(state, named):
    found = parse(metrics.render(dict(SNAPSHOT, state=state), EXTRA, 1.0))
    states = dict((dict(ls)["state"], v) for (n, ls), v in found.items() if n == "eagle3_job_state")
    assert set(states) == set(metrics.STATES)
    assert states == dict((s, 1.0 if s == named else 0.0) for s in metrics.STATES)


def test_the_file_is_replaced_by_a_rename_and_no_temporary_file_stays(tmp_path):
    name = metrics.file_name("demo", 1)
    assert name == "eagle3_extraction_demo_shard1.prom"
    assert metrics.write(str(tmp_path), SNAPSHOT, EXTRA, 1.0)
    path = tmp_path / name
    first = os.stat(path)
    assert first.st_mode & 0o777 == 0o644
    assert metrics.write(str(tmp_path), dict(SNAPSHOT, samples_done=41), EXTRA, 2.0)
    # a new inode: a reader holding the old file reads it whole, never a mix of the two
    assert os.stat(path).st_ino != first.st_ino
    assert value(parse(path.read_text()), "eagle3_job_samples_done") == 41
    assert os.listdir(tmp_path) == [name]


def test_a_write_cut_short_leaves_the_last_file_whole_and_raises_nothing(tmp_path, monkeypatch, caplog):
    assert metrics.write(str(tmp_path), SNAPSHOT, EXTRA, 1.0)
    before = (tmp_path / metrics.file_name("demo", 1)).read_text()

    def full(_fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    assert metrics.write(str(tmp_path), dict(SNAPSHOT, samples_done=41), EXTRA, 2.0) is False
    assert (tmp_path / metrics.file_name("demo", 1)).read_text() == before
    assert os.listdir(tmp_path) == [metrics.file_name("demo", 1)]
    assert "cannot write the metrics file" in caplog.text


def test_a_metrics_dir_that_cannot_be_made_raises_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert metrics.write(str(blocker / "metrics"), SNAPSHOT, EXTRA, 1.0) is False


def test_the_job_writes_its_metrics_and_they_end_equal_to_status_json(job_dirs):
    samples = make_samples(30)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples, extra_lines=["{broken"])
    metrics_dir = job_dirs["root"] / "node-exporter"
    seen_at_work = []

    async def body():
        server = await StandinServer(job_dirs["dump"]).start()
        try:
            cfg = config_for(job_dirs, ds, server.url, metrics_dir=str(metrics_dir), shard_index=0, shard_count=1)
            job = jobmod.Job(cfg, torch)
            task = asyncio.create_task(job.run_async())
            path = metrics_dir / metrics.file_name("testjob", 0)
            while not task.done():
                if path.exists():
                    seen_at_work.append(parse(path.read_text()))
                await asyncio.sleep(0.05)
            return await task, job
        finally:
            await server.stop()
    code, job = asyncio.run(body())
    assert code == jobmod.EXIT_COMPLETE
    assert seen_at_work, "no metrics file while the job ran"
    with open(os.path.join(job_dirs["out"], "status.json"), encoding="utf-8") as f:
        status = json.load(f)
    found = parse((metrics_dir / metrics.file_name("testjob", 0)).read_text())
    labels = {"extraction_job": "testjob", "shard": "0", "shard_count": "1"}
    assert value(found, "eagle3_job_samples_done", **labels) == status["samples_done"] == 30
    assert value(found, "eagle3_job_samples", **labels) == 30
    assert value(found, "eagle3_job_tokens_done", **labels) == status["tokens_done"]
    assert value(found, "eagle3_job_bad_lines", **labels) == 1
    assert value(found, "eagle3_job_state", state="complete") == 1
    assert value(found, "eagle3_job_started_timestamp_seconds") == status["started_at"]
    # the last durable sample is this run's, after its start, no later than the file
    assert status["started_at"] < value(found, "eagle3_job_last_durable_sample_timestamp_seconds") \
        <= value(found, "eagle3_job_metrics_updated_timestamp_seconds")
    assert value(found, "eagle3_job_shm_high_watermark_bytes") == int(1.0 * status["shm_total_bytes"])
    assert [n for n in os.listdir(metrics_dir) if not n.endswith(".prom")] == []
