# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What paces the server while the job drives it (issue 21): /dev/shm's watermark, read just
before each request, not a fixed window of samples tied to the drain; status.json written off
the event loop; a drain thread that is done takes the next dump at once."""
import asyncio
import json
import os
import sqlite3
import threading
import time

from job_helpers import StandinServer, config_for, make_samples, slow_drains, torch, until, write_dataset
from test_job_run import check_outputs
from eagle3_extraction_job import drain, space, status
from eagle3_extraction_job import job as jobmod


async def with_server(job_dirs, body, server_cls=StandinServer):
    server = await server_cls(job_dirs["dump"]).start()
    try:
        return await body(server)
    finally:
        await server.stop()


def big_shm(_path):
    return space.Usage(10**12, 10**12)


def test_the_server_is_not_held_to_the_drains_pace_while_dev_shm_has_room(job_dirs, monkeypatch):
    # one slot, one slow drain thread: with a window of 4 x concurrency samples between
    # request and durable file, the fifth request waited for the first file; the window
    # is now what /dev/shm holds, so every request goes while the dumps wait for the drain
    slow_drains(monkeypatch, 0.25)
    samples = make_samples(12)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    seen = []

    async def body(server):
        seen.append(server)
        cfg = config_for(job_dirs, ds, server.url, concurrency=1, drain_workers=1)
        return await jobmod.Job(cfg, torch, usage_fn=big_shm).run_async()
    assert asyncio.run(with_server(job_dirs, body)) == jobmod.EXIT_COMPLETE
    arrivals = seen[0].waiting_at_arrival
    assert len(arrivals) == 12
    assert max(arrivals) >= 8, arrivals
    check_outputs(job_dirs["out"], samples)


def test_the_send_window_is_what_fits_under_the_high_watermark(job_dirs):
    samples = make_samples(10, length=lambda n: 100)   # 100 tokens x 144 bytes + 4096 a file
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    shm = {"total": 10**9}

    def usage(path):
        return space.Usage(shm["total"], shm["total"]) if path == job_dirs["dump"] else big_shm(path)
    cfg = config_for(job_dirs, ds, "http://127.0.0.1:9", concurrency=3, shm_high=0.5, shm_low=0.4)
    job = jobmod.Job(cfg, torch, usage_fn=usage)
    job.load_dataset()
    todo = list(job.samples.values())
    per_sample = space.estimate(1, 100, 16, 3)
    assert job.send_window(todo) == jobmod.SEND_WINDOW_MAX        # 1 GB holds more
    shm["total"] = 2000 * per_sample
    assert job.send_window(todo) == 1000
    shm["total"] = 10 * per_sample                                 # at least 4 x concurrency
    assert job.send_window(todo) == 12
    assert job.send_window([]) == 12

    def no_dir(path):
        raise FileNotFoundError(path)
    job.usage_fn = no_dir                                          # the gate names it later
    assert job.send_window(todo) == 12


def test_the_watermark_is_read_in_the_slot_just_before_each_request(job_dirs):
    # every sample of the window may be waiting for the slot: the first answer fills
    # /dev/shm, and none of the samples that waited for the slot may go on an earlier
    # reading of the gate
    samples = make_samples(6)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    full = {"on": False, "filling": True, "sent_while_full": 0}

    def usage(path):
        if path == job_dirs["dump"] and full["on"]:
            return space.Usage(100, 10)            # 90 % used
        return big_shm(path)

    class FillingServer(StandinServer):
        async def generate(self, request):
            if full["on"]:
                full["sent_while_full"] += 1
            full["on"] = full["filling"]            # this answer fills /dev/shm
            return await super().generate(request)

    async def body(server):
        # every answer fills /dev/shm here, the capture check's too: it is left out
        cfg = config_for(job_dirs, ds, server.url, concurrency=1, shm_high=0.7, shm_low=0.5,
                         capture_check=False)
        job = jobmod.Job(cfg, torch, usage_fn=usage)
        task = asyncio.create_task(job.run_async())
        await until(lambda: job.state == "paused", "the job paused on the full /dev/shm", step=0.05)
        await asyncio.sleep(0.5)
        received = len(server.received)
        full["filling"] = full["on"] = False      # the drain caught up: the rest may go
        return received, await task
    received, code = asyncio.run(with_server(job_dirs, body, FillingServer))
    assert received == 1 and full["sent_while_full"] == 0 and code == jobmod.EXIT_COMPLETE
    check_outputs(job_dirs["out"], samples)


def test_status_json_is_written_off_the_event_loop_and_the_last_write_wins(job_dirs, monkeypatch):
    # a status file's fsync waits on the output disk; on the event loop it would stop the
    # sending for that long. A write that ends after a newer one must not replace it.
    real_write = status.write_status
    threads = []

    def slow_write(path, value, mode=status.CARD_MODE):
        if os.path.basename(path) == "status.json":
            threads.append(threading.current_thread() is threading.main_thread())
            if threads[-1] is False:
                time.sleep(0.2)
        real_write(path, value, mode)
    monkeypatch.setattr(status, "write_status", slow_write)
    samples = make_samples(8)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    class SlowServer(StandinServer):
        async def generate(self, request):
            await asyncio.sleep(0.1)
            return await super().generate(request)

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, concurrency=1, status_interval=0.01)
        job = jobmod.Job(cfg, torch)
        lags = []

        async def watch():                           # the event loop's own delay
            while True:
                t0 = time.monotonic()
                await asyncio.sleep(0.01)
                lags.append(time.monotonic() - t0 - 0.01)
        watcher = asyncio.create_task(watch())
        try:
            return await job.run_async(), job, max(lags)
        finally:
            watcher.cancel()
    code, job, lag = asyncio.run(with_server(job_dirs, body, SlowServer))
    assert code == jobmod.EXIT_COMPLETE
    assert False in threads and threads[-1] is True   # the loop's writes on a thread; the last, at the end
    assert lag < 0.15, lag
    with open(job.cfg.effective_status_file, encoding="utf-8") as f:
        assert '"state": "complete"' in f.read()


class LockThatSaysWhoWaits:
    """A lock that sets ``waiting`` when a thread comes to it while another holds it."""

    def __init__(self):
        self.lock, self.waiting = threading.Lock(), threading.Event()

    def __enter__(self):
        if self.lock.locked():
            self.waiting.set()
        self.lock.acquire()
        return self

    def __exit__(self, *exc):
        self.lock.release()


def test_a_status_snapshot_older_than_the_one_written_never_replaces_it(job_dirs, monkeypatch):
    # the status loop's thread took its snapshot ("running") before the end of the run took
    # its own ("complete"), and comes to write it while "complete" is being written. Whether
    # it is older than what was written must be asked under the lock: asked before, it is
    # "not older than nothing yet", and "running" lands after "complete" for good.
    ds = write_dataset(job_dirs["root"] / "d.jsonl", make_samples(1))
    job = jobmod.Job(config_for(job_dirs, ds, "http://127.0.0.1:1"), torch)
    job._status_lock = lock = LockThatSaysWhoWaits()   # pylint: disable=protected-access
    older = threading.Thread(target=job._write_status_file,  # pylint: disable=protected-access
                             args=({"state": "running", "updated_at": 1.0},))
    real_write = status.write_status

    def write(path, value, mode=status.CARD_MODE):
        if value["state"] == "complete":
            older.start()                     # while "complete" is being written...
            assert lock.waiting.wait(10)      # ...the older snapshot is at the lock
        real_write(path, value, mode)
    monkeypatch.setattr(status, "write_status", write)
    job._write_status_file({"state": "complete", "updated_at": 2.0})  # pylint: disable=protected-access
    older.join(10)
    assert not older.is_alive()
    with open(job.cfg.effective_status_file, encoding="utf-8") as f:
        assert json.load(f)["state"] == "complete"


def test_a_drain_thread_that_is_done_takes_the_next_dump_at_once(job_dirs, monkeypatch):
    # the first dump's drain takes long; the second dump appears while it runs. The
    # first version drained in passes: the second dump waited for the first's pass to end.
    original = drain.Drainer.drain
    samples = make_samples(2)
    slow_id = samples[0][0]

    def drain_one(self, dump_path, sample):
        if sample.sample_id == slow_id:
            time.sleep(1.5)
        return original(self, dump_path, sample)
    monkeypatch.setattr(drain.Drainer, "drain", drain_one)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    class OrderedServer(StandinServer):
        async def generate(self, request):
            body = await request.json()
            if not body["rid"].endswith(slow_id):
                await asyncio.sleep(0.3)           # its dump appears after the first
            return await super().generate(request)

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, concurrency=2, drain_workers=2,
                         poll_interval=0.05)
        return await jobmod.Job(cfg, torch, usage_fn=big_shm).run_async()
    assert asyncio.run(with_server(job_dirs, body, OrderedServer)) == jobmod.EXIT_COMPLETE
    db = sqlite3.connect(os.path.join(job_dirs["out"], "manifest.sqlite"))
    done_at = dict(db.execute("SELECT sample_id, done_at FROM samples"))
    db.close()
    assert done_at[samples[1][0]] < done_at[slow_id] - 0.5, done_at
    check_outputs(job_dirs["out"], samples)
