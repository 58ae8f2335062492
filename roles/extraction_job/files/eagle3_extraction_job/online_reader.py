# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online mode's reader: a consumer that trains nothing (a CPU host, a test).

``python -m eagle3_extraction_job reader --config run.yaml`` reads the same ``run.yaml`` as SpecForge's
producer and consumes its ref channel with SpecForge 0.2.0's own consumer-side API: it polls
``StreamingRefChannel(<control_dir>/refs.jsonl)``, reads each sample's tensors with
``MooncakeFeatureStore.get``, records them, ``release``\\ s them (the store frees the keys) and then
``mark_consumed`` (the producer's in-flight window). When the producer closed the channel and every
published ref is consumed it calls ``mark_consumer_done``; a failure is ``mark_consumer_failed``.

Each attempt (``<control_root>/<run_id>/attempt-NNNN/control``, the control dir's parent) has its own dir,
``<output_dir>/<run_id>-reader/attempt-NNNN/``, so that "every sample once" is a property of one attempt: a new
attempt leases every prompt again. Per sample, one JSON line in its ``records.jsonl``: sample_id, the source task
id, the server that captured it, its token ids and, per feature, its shape, dtype and the sha256 of its bytes. A
batch of lines is appended and fsynced before its refs are released and counted consumed, so a recorded sample is
durable before its features leave the store. ``progress.json`` beside it (written to a temporary name, fsynced,
renamed) holds state, consumed, samples/s and how often the reader started in the attempt, for status.

A reader killed within its attempt (systemd starts it again) goes on from SpecForge's consumed counter: the refs
recorded after the last count (killed between the fsync and the count) are not read again; their keys are freed
and they are counted. So a sample is recorded once per attempt, whatever the kill.

Exit status: 0 the attempt finished; 2 refused to start (bad config); 3 the attempt failed (the producer's or
the reader's failure marker): SpecForge never resumes a producer, so a restart cannot help; the unit does not
restart on 2 or 3 (``RestartPreventExitStatus``) and the next ``extract.yml`` starts a new attempt.

The Mooncake client's settings come from the environment SpecForge's roles read (``MOONCAKE_*``, the
host plan's ``online.environment``); it mounts no segment of its own unless ``MOONCAKE_GLOBAL_SEGMENT_SIZE``
says so.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import time

EXIT_DONE, EXIT_REFUSED, EXIT_ATTEMPT_FAILED = 0, 2, 3
BATCH = 32
POLL_S = 0.2
ATTEMPT = re.compile(r"attempt-[0-9]{4,}")


def reader_dir(cfg):
    """``<output_dir>/<run_id>-reader/<attempt>``: one dir an attempt."""
    return os.path.join(cfg["output_dir"], f"{cfg['run_id']}-reader", cfg["attempt"])


def load_config(path):
    import yaml  # pylint: disable=import-outside-toplevel
    with open(path, encoding="utf-8") as stream:
        raw = yaml.safe_load(stream)
    disaggregated = ((raw.get("deployment") or {}).get("disaggregated") or {})
    cfg = {"run_id": raw.get("run_id"), "output_dir": raw.get("output_dir"),
           "control_dir": disaggregated.get("control_dir")}
    missing = [key for key, value in cfg.items() if not isinstance(value, str) or not value]
    if missing:
        raise ValueError(f"{path}: {', '.join(missing)} not set (run_id, output_dir, "
                         "deployment.disaggregated.control_dir)")
    # the attempt's name: the control dir is <control_root>/<run_id>/attempt-NNNN/control (the role's layout)
    cfg["attempt"] = os.path.basename(os.path.dirname(os.path.normpath(cfg["control_dir"])))
    if not ATTEMPT.fullmatch(cfg["attempt"]):
        raise ValueError(f"{path}: deployment.disaggregated.control_dir={cfg['control_dir']!r} is not "
                         "<run dir>/attempt-NNNN/control")
    return cfg


def mooncake_setup(environ):
    """MooncakeDistributedStore.setup's settings from the variables SpecForge's own store reads."""
    for name in ("MOONCAKE_METADATA_SERVER", "MOONCAKE_MASTER_SERVER_ADDR"):
        if not environ.get(name):
            raise ValueError(f"{name} is not set")
    return {"local_hostname": environ.get("MOONCAKE_LOCAL_HOSTNAME", "127.0.0.1"),
            "metadata_server": environ["MOONCAKE_METADATA_SERVER"],
            "master_server_addr": environ["MOONCAKE_MASTER_SERVER_ADDR"],
            "protocol": environ.get("MOONCAKE_PROTOCOL", "tcp"),
            "rdma_devices": environ.get("MOONCAKE_RDMA_DEVICES", ""),
            "global_segment_size": int(environ.get("MOONCAKE_GLOBAL_SEGMENT_SIZE", "0")),
            "local_buffer_size": int(environ.get("MOONCAKE_LOCAL_BUFFER_SIZE", str(256 << 20)))}


def record(ref, tensors):
    """One sample's line: where it came from and, per feature, what it holds."""
    features = {}
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        data = tensor.reshape(-1).view(_byte_dtype()).numpy().tobytes() if tensor.numel() else b""
        features[name] = {"shape": list(tensor.shape), "dtype": str(tensor.dtype).replace("torch.", ""),
                          "sha256": hashlib.sha256(data).hexdigest()}
    found = {"sample_id": ref.sample_id, "source_task_id": ref.source_task_id,
             "server": ref.metadata.get("server"), "generation": ref.metadata.get("generation"),
             "features": features}
    # the prompt's token ids (its identity, not a hidden state): what lets anyone recompute and compare the
    # features this line's hashes stand for
    if "input_ids" in tensors:
        found["input_ids"] = tensors["input_ids"].reshape(-1).tolist()
    return found


def _byte_dtype():
    import torch  # pylint: disable=import-outside-toplevel
    return torch.uint8


def append_durably(path, lines):
    with open(path, "ab") as stream:
        stream.write(b"".join(json.dumps(line, sort_keys=True).encode() + b"\n" for line in lines))
        stream.flush()
        os.fsync(stream.fileno())


def write_json(path, value):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as stream:
        json.dump(value, stream, sort_keys=True)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)


def recorded_count(path):
    try:
        with open(path, "rb") as stream:
            return sum(1 for line in stream if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0


def drop_partial_line(path):
    """Cut a line a kill left half written (appends are whole batches, but a write may be cut): the next
    append then starts a line of its own."""
    try:
        with open(path, "rb+") as stream:
            data = stream.read()
            end = data.rfind(b"\n") + 1
            if end < len(data):
                stream.truncate(end)
                stream.flush()
                os.fsync(stream.fileno())
    except FileNotFoundError:
        pass


def read_json(path):
    try:
        with open(path, encoding="utf-8") as stream:
            found = json.load(stream)
    except (FileNotFoundError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class Reader:
    """Consumes the channel once; ``run`` returns the exit status."""

    def __init__(self, cfg, channel, store, clock=time.monotonic):
        self.cfg, self.channel, self.store, self.clock = cfg, channel, store, clock
        self.dir = reader_dir(cfg)
        os.makedirs(self.dir, exist_ok=True)
        self.records = os.path.join(self.dir, "records.jsonl")
        self.progress = os.path.join(self.dir, "progress.json")
        self.started = clock()
        earlier = read_json(self.progress)
        # how often a reader started in this attempt (1: never killed), and what its restarts recovered
        self.starts = int(earlier.get("starts", 0)) + 1
        self.recovered = int(earlier.get("recovered", 0))
        self.consumed = self.session = 0

    def run(self):
        """The exit status; any error fails the attempt (SpecForge's consumer failure marker: the producer stops)."""
        try:
            return self._run()
        except Exception as exc:  # pylint: disable=broad-except
            reason = f"{type(exc).__name__}: {exc}"
            self.channel.mark_consumer_failed(reason)
            self._write_progress("failed", reason)
            return EXIT_ATTEMPT_FAILED

    def _run(self):
        failure = self.channel.failure() or self.channel.consumer_failure()
        if failure:
            # a restart of a failed attempt: nothing to consume (the next run of the role starts a new attempt)
            self.consumed = self.channel.seed_consumed()
            self._write_progress("failed", failure)
            return EXIT_ATTEMPT_FAILED
        # the producer captures nothing before the consumer says how many refs one step takes (one, here);
        # a restart within the attempt finds its own value
        self.channel.publish_consumer_quantum(1, allow_existing=True)
        self._resume()
        self._write_progress("running")
        while True:
            refs = self.channel.poll(max_n=BATCH)
            if refs:
                self._consume(refs)
                continue
            failure = self.channel.failure()
            if failure:
                self._write_progress("failed", failure)
                return EXIT_ATTEMPT_FAILED
            # closed first, then counted: every ref published before the close is in the file
            if self.channel.is_closed() and self.consumed >= recorded_count(self.channel.path):
                self.channel.mark_consumer_done()
                self._write_progress("done")
                return EXIT_DONE
            time.sleep(POLL_S)

    def _resume(self):
        """Go on from SpecForge's counter: the refs before it were recorded and released; those recorded after it
        (a kill between the records' fsync and the count) are freed and counted, not read again."""
        self.consumed = self.channel.seed_consumed()
        if self.consumed:
            self.channel.poll(max_n=self.consumed)
        drop_partial_line(self.records)
        recorded = recorded_count(self.records)
        if recorded < self.consumed:
            raise RuntimeError(f"{self.records} holds {recorded} records but SpecForge counted {self.consumed} "
                               "consumed: records were lost")
        while self.consumed < recorded:
            refs = self.channel.poll(max_n=recorded - self.consumed)
            if not refs:
                raise RuntimeError(f"{self.records} holds {recorded} records, the channel fewer refs")
            for ref in refs:
                # the keys may be gone already (released before the kill): abort counts that as freed
                self.store.adopt(ref)
                self.store.abort(ref.sample_id, reason="recorded before a restart")
            self.channel.mark_consumed(len(refs))
            self.consumed += len(refs)
            self.recovered += len(refs)

    def _consume(self, refs):
        lines, handles = [], []
        for ref in refs:
            tensors, handle = self.store.get(ref)
            lines.append(record(ref, tensors))
            handles.append(handle)
        append_durably(self.records, lines)
        for handle in handles:
            self.store.release(handle)
        self.channel.mark_consumed(len(refs))
        self.consumed += len(refs)
        self.session += len(refs)
        self._write_progress("running")

    def _write_progress(self, state, reason=""):
        elapsed = max(self.clock() - self.started, 1e-9)
        write_json(self.progress, {"state": state, "consumed": self.consumed, "reason": reason,
                                   "samples_per_s": round(self.session / elapsed, 3),
                                   "starts": self.starts, "recovered": self.recovered,
                                   "time": time.time()})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="eagle3_extraction_job reader")
    parser.add_argument("--config", required=True, help="SpecForge's run.yaml")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        setup = mooncake_setup(os.environ)
    except (OSError, ValueError) as exc:
        print(f"reader: refused to start: {exc}", file=sys.stderr, flush=True)
        return EXIT_REFUSED
    # SpecForge's consumer-side API (imported here: the job's other commands run without SpecForge)
    # pylint: disable=import-outside-toplevel
    from specforge.runtime.data_plane.mooncake_store import MooncakeFeatureStore
    from specforge.runtime.data_plane.streaming_ref_channel import StreamingRefChannel
    channel = StreamingRefChannel(os.path.join(cfg["control_dir"], "refs.jsonl"))
    try:
        store = MooncakeFeatureStore(store_id=os.environ.get("DISAGG_STORE_ID", cfg["run_id"]), setup_kwargs=setup)
        status = Reader(cfg, channel, store).run()
    except Exception as exc:  # pylint: disable=broad-except
        # no store (the master down, say): the attempt is over (the producer stops on this marker)
        channel.mark_consumer_failed(f"{type(exc).__name__}: {exc}")
        print(f"reader: failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return EXIT_ATTEMPT_FAILED
    if status == EXIT_DONE:
        print(f"reader: done ({cfg['attempt']})", flush=True)
    else:
        print(f"reader: {cfg['attempt']} failed: {channel.failure() or channel.consumer_failure()}; a restart "
              "cannot help (SpecForge never resumes a producer): the next run of the role starts a new attempt",
              file=sys.stderr, flush=True)
    return status
