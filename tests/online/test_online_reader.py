# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reader's attempt rules, over SpecForge's real ref channel and a store kept in a dict (the real store's
contract: a released or aborted sample is gone, a get of it raises KeyError): a reader killed within its attempt
goes on without reading a sample twice, a failed attempt exits with the status its unit does not restart, and
each attempt's records are kept apart."""
import json
import os
import re

import pytest
import torch

from online_stack import ROOT
from eagle3_extraction_job import online_reader

from specforge.runtime.contracts import FeatureSpec, SampleRef
from specforge.runtime.data_plane.streaming_ref_channel import StreamingRefChannel

CONSUMER_UNIT = os.path.join(ROOT, "roles", "online_training", "templates", "eagle3-online-consumer.service.j2")


class DictStore:
    """MooncakeFeatureStore's consumer-side calls over a dict of {sample_id: tensors}."""

    def __init__(self):
        self.samples, self.gets = {}, []

    def put(self, sample_id, tensors):
        self.samples[sample_id] = tensors

    def get(self, ref):
        if ref.sample_id not in self.samples:
            raise KeyError(f"sample {ref.sample_id} not available (freed, stale, or never written)")
        self.gets.append(ref.sample_id)
        return self.samples[ref.sample_id], ref.sample_id

    def release(self, handle):
        self.samples.pop(handle, None)

    def adopt(self, ref):
        assert ref.metadata.get("generation") is not None

    def abort(self, sample_id, reason="aborted"):
        del reason
        self.samples.pop(sample_id, None)


class Killed(BaseException):
    """What a SIGKILL is to the reader: nothing of its own runs after it."""


def _ref(index):
    sample_id = f"s{index:03d}"
    specs = {"input_ids": FeatureSpec("input_ids", (1, 4), "int64"),
             "hidden_state": FeatureSpec("hidden_state", (1, 4, 6), "bfloat16")}
    return SampleRef(sample_id=sample_id, run_id="run", source_task_id=f"t{index}", feature_store_uri="mooncake://",
                     feature_keys={name: f"run/{sample_id}/g0/{name}" for name in specs}, feature_specs=specs,
                     strategy="eagle3", metadata={"generation": 0, "server": "http://gw"})


def _attempt(tmp_path, number, samples):
    """A channel of ``samples`` published refs (closed) and a store that holds them; the reader's config."""
    control = tmp_path / "control-root" / "run" / ("attempt-%04d" % number) / "control"
    producer = StreamingRefChannel(str(control / "refs.jsonl"))
    store = DictStore()
    for index in range(samples):
        ref = _ref(index)
        store.put(ref.sample_id, {"input_ids": torch.arange(4).reshape(1, 4) + index,
                                  "hidden_state": torch.full((1, 4, 6), float(index), dtype=torch.bfloat16)})
        producer.publish(ref)
    producer.close()
    cfg = {"run_id": "run", "output_dir": str(tmp_path / "output"), "control_dir": str(control),
           "attempt": "attempt-%04d" % number}
    return cfg, producer, store


def _channel(cfg):
    return StreamingRefChannel(os.path.join(cfg["control_dir"], "refs.jsonl"))


def _records(cfg):
    with open(os.path.join(online_reader.reader_dir(cfg), "records.jsonl"), encoding="utf-8") as stream:
        return [json.loads(line) for line in stream]


def _progress(cfg):
    with open(os.path.join(online_reader.reader_dir(cfg), "progress.json"), encoding="utf-8") as stream:
        return json.load(stream)


def test_a_reader_killed_between_its_records_and_its_count_goes_on_without_reading_a_sample_twice(tmp_path, monkeypatch):
    cfg, producer, store = _attempt(tmp_path, 1, 40)
    first = _channel(cfg)
    counted = first.mark_consumed

    def killed_after_the_first_batch(n):
        if first.consumed_remote() >= online_reader.BATCH:
            raise Killed()
        counted(n)

    # the second batch is recorded (fsynced) and its samples released, then the reader dies before the count
    monkeypatch.setattr(first, "mark_consumed", killed_after_the_first_batch)
    with pytest.raises(Killed):
        online_reader.Reader(cfg, first, store).run()
    assert first.consumed_remote() == online_reader.BATCH and len(_records(cfg)) == 40

    # systemd starts it again: it goes on from SpecForge's count, the 8 recorded after it are counted, not re-read
    assert online_reader.Reader(cfg, _channel(cfg), store).run() == online_reader.EXIT_DONE
    ids = [record["sample_id"] for record in _records(cfg)]
    assert ids == ["s%03d" % index for index in range(40)]
    assert store.gets == ids and store.samples == {}
    progress = _progress(cfg)
    assert (progress["state"], progress["consumed"], progress["starts"], progress["recovered"]) == ("done", 40, 2, 8)
    assert producer.consumed_remote() == 40 and producer.consumer_stopped()


def test_a_half_written_record_line_is_cut_before_the_next_append(tmp_path):
    cfg, _producer, store = _attempt(tmp_path, 1, 3)
    os.makedirs(online_reader.reader_dir(cfg))
    with open(os.path.join(online_reader.reader_dir(cfg), "records.jsonl"), "wb") as stream:
        stream.write(b'{"sample_id": "s0')
    assert online_reader.Reader(cfg, _channel(cfg), store).run() == online_reader.EXIT_DONE
    assert [record["sample_id"] for record in _records(cfg)] == ["s000", "s001", "s002"]


def test_a_failed_attempt_exits_with_a_status_its_unit_does_not_restart(tmp_path):
    cfg, producer, store = _attempt(tmp_path, 1, 3)
    producer.fail("RuntimeError: the store's master restarted")
    assert online_reader.Reader(cfg, _channel(cfg), store).run() == online_reader.EXIT_ATTEMPT_FAILED
    # started again anyway (by hand): it says the same at once and reads nothing
    store.gets.clear()
    assert online_reader.Reader(cfg, _channel(cfg), store).run() == online_reader.EXIT_ATTEMPT_FAILED
    assert store.gets == []
    progress = _progress(cfg)
    assert progress["state"] == "failed" and "master restarted" in progress["reason"]
    # the unit leaves the attempt failed: it restarts a killed reader, never one that exited 2 or 3
    with open(CONSUMER_UNIT, encoding="utf-8") as stream:
        unit = stream.read()
    prevented = re.search(r"^RestartPreventExitStatus=(.*)$", unit, re.M)
    expected = {str(online_reader.EXIT_REFUSED), str(online_reader.EXIT_ATTEMPT_FAILED)}
    assert prevented and set(prevented.group(1).split()) == expected
    assert re.search(r"^Restart=on-failure$", unit, re.M)


def test_a_reader_error_fails_the_attempt_for_the_producer_too(tmp_path):
    cfg, producer, store = _attempt(tmp_path, 1, 3)
    store.samples.clear()   # the master restarted: the store lost every sample
    assert online_reader.Reader(cfg, _channel(cfg), store).run() == online_reader.EXIT_ATTEMPT_FAILED
    assert "not available" in producer.consumer_failure()
    assert _progress(cfg)["state"] == "failed"


def test_each_attempt_keeps_its_records_apart(tmp_path):
    # a new attempt (online_training_restart, or after a failed one) leases every prompt again
    first, _producer, store = _attempt(tmp_path, 1, 5)
    assert online_reader.Reader(first, _channel(first), store).run() == online_reader.EXIT_DONE
    second, _producer, store = _attempt(tmp_path, 2, 5)
    assert online_reader.Reader(second, _channel(second), store).run() == online_reader.EXIT_DONE
    assert online_reader.reader_dir(second).endswith(os.path.join("run-reader", "attempt-0002"))
    for cfg in (first, second):
        assert [record["sample_id"] for record in _records(cfg)] == ["s%03d" % index for index in range(5)]
        assert _progress(cfg)["consumed"] == 5 and _progress(cfg)["starts"] == 1


def test_the_attempt_is_the_control_dirs_parent(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text(json.dumps({"run_id": "r", "output_dir": "/out", "deployment": {"disaggregated": {
        "control_dir": "/var/lib/eagle3-online/r/attempt-0007/control"}}}))
    assert online_reader.load_config(str(run))["attempt"] == "attempt-0007"
    run.write_text(json.dumps({"run_id": "r", "output_dir": "/out", "deployment": {"disaggregated": {
        "control_dir": "/var/lib/eagle3-online/r/control"}}}))
    with pytest.raises(ValueError, match="attempt-NNNN"):
        online_reader.load_config(str(run))
