# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.json while the output disk is full: the job pauses, and its status says so.

The full disk is faked where it bites: under the output dir, no new block - a file cannot be made, nor
written past its length (what ENOSPC does to a new temporary file); writing over a file's own bytes
still works, as on the disk. The usage the job reads says the disk is full at the same time."""
import asyncio
import errno
import json
import os

from job_helpers import StandinServer, config_for, make_samples, torch, until, write_dataset
from test_job_run import check_outputs, run
from test_send_window_and_drain_loop import with_server
from eagle3_extraction_job import job as jobmod
from eagle3_extraction_job import space, status


def no_new_blocks(monkeypatch, under, full):
    real_open, real_pwrite = os.open, os.pwrite

    def refused():
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fake_open(path, flags, mode=0o777, **kw):
        if full["on"] and str(path).startswith(under) and flags & os.O_CREAT and not os.path.exists(path):
            raise refused()
        return real_open(path, flags, mode, **kw)

    def fake_pwrite(fd, data, offset):
        if full["on"] and offset + len(data) > os.fstat(fd).st_size:
            raise refused()
        return real_pwrite(fd, data, offset)
    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "pwrite", fake_pwrite)


def test_while_the_output_disk_is_full_status_json_says_paused_output_disk_full(job_dirs, monkeypatch):
    samples = make_samples(6)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    full = {"on": False}
    no_new_blocks(monkeypatch, str(job_dirs["out"]), full)

    def usage(path):
        if full["on"] and path == str(job_dirs["out"]):
            return space.Usage(10**12, 0)
        return space.Usage(10**12, 10**12)

    class SlowServer(StandinServer):
        async def generate(self, request):
            await asyncio.sleep(0.1)
            return await super().generate(request)

    def on_disk():
        try:
            with open(os.path.join(job_dirs["out"], "status.json"), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, concurrency=1, status_interval=0.02,
                         output_free_floor_bytes=2**20, output_free_resume_bytes=2**20)
        job = jobmod.Job(cfg, torch, usage_fn=usage)
        task = asyncio.create_task(job.run_async())
        await until(lambda: job.totals["samples"] >= 1 and on_disk().get("state") == "running",
                    "the job ran and said so")
        await asyncio.sleep(0.1)   # a few status writes: the spare is there
        full["on"] = True
        await until(lambda: on_disk().get("state") == "paused", "status.json said paused while the disk was full")
        seen = on_disk()
        full["on"] = False
        return await asyncio.wait_for(task, 30), seen
    code, seen = run(with_server(job_dirs, body, SlowServer))
    assert seen["paused"].startswith("output disk full: ")
    assert code == jobmod.EXIT_COMPLETE and on_disk()["state"] == "complete"
    check_outputs(job_dirs["out"], samples)


def test_the_status_file_is_swapped_in_place_and_read_as_json(tmp_path):
    path = str(tmp_path / "status.json")
    for state in ("running", "paused", "complete"):
        status.write_status(path, {"state": state}, mode=status.STATUS_MODE)
        with open(path, encoding="utf-8") as f:
            assert json.load(f) == {"state": state}
    spare = tmp_path / ".status.json.spare"
    assert os.path.getsize(path) == os.path.getsize(spare) == status.STATUS_SLOT_BYTES
    assert json.loads(spare.read_text())["state"] == "paused"   # the status before, kept as the spare


def test_where_the_files_cannot_be_swapped_the_status_is_renamed_over(tmp_path, monkeypatch):
    monkeypatch.setattr(status, "exchange", lambda first, second: False)   # an old kernel, an overlay
    path = str(tmp_path / "status.json")
    for state in ("running", "complete"):
        status.write_status(path, {"state": state})
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == {"state": "complete"}
    assert os.listdir(tmp_path) == ["status.json"]
