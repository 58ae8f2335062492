# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A shard that makes no progress while its server is healthy says so and recovers (stall.py).

A server that takes requests and never answers, a drain that hangs: the shard is ``stalled`` in
status.json with what it waits on, restarts (the count kept in the shard dir and shown), and past
the bound stops with a final ``stalled`` and the exit status the unit does not restart. A server
that is not healthy, and the first sample after a restart, are no stall. The fleet's stand-in
server (lab/standins/sglang_server, SGLANG_STANDIN_HANG_AFTER) through the job's own command line
closes the file.
"""
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time

from aiohttp import web

from job_helpers import StandinServer, config_for, make_samples, torch, write_dataset
from standin_process import ROOT, standin_server
from test_job_run import check_outputs, run, with_server
from eagle3_extraction_job import drain, stall
from eagle3_extraction_job import job as jobmod
from eagle3_extraction_job import config as configmod

import pytest

WINDOW = 1.0


def status_of(out):
    with open(os.path.join(out, "status.json"), encoding="utf-8") as f:
        return json.load(f)


def counts_of(out):
    return stall.read_counts(out)


def watchdog_factory(hard_exits, grace=30.0, on_hard_exit=None):
    """The watchdog with its process-ending step recorded instead (the test is that process)."""
    def hard_exit(code):
        hard_exits.append(code)
        if on_hard_exit:
            on_hard_exit()

    def make(job, window, restarts_max, output_dir):
        return stall.Watchdog(job, window, restarts_max, output_dir, hard_exit=hard_exit, grace=grace)
    return make


async def one_run(job_dirs, server, ds, hard_exits, **over):
    cfg = config_for(job_dirs, ds, server.url, **dict(dict(stall_window=WINDOW, stall_restarts_max=2,
                                                           request_timeout=120.0, ack_timeout=120.0), **over))
    job = jobmod.Job(cfg, torch,
                     watchdog_factory=watchdog_factory(hard_exits))
    started = time.monotonic()
    code = await asyncio.wait_for(job.run_async(), 60)
    return code, time.monotonic() - started, status_of(job_dirs["out"])


def test_a_server_that_takes_requests_and_never_answers_is_stalled_restarted_then_stopped(job_dirs):
    samples = make_samples(6)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    hard_exits = []

    async def body(server):
        server.wedged = True      # every request is taken and never answered
        return [await one_run(job_dirs, server, ds, hard_exits) for _restart in range(3)]
    runs = run(with_server(job_dirs, body))
    codes = [code for code, _took, _st in runs]
    # two restarts (the bound), then stopped with the status the unit does not restart
    assert codes == [jobmod.EXIT_STALL_RESTART, jobmod.EXIT_STALL_RESTART, jobmod.EXIT_STALLED]
    assert all(took < WINDOW + 5 for _code, took, _st in runs), runs
    for n, (_code, _took, st) in enumerate(runs):
        # never "running" while stalled; what it waits on, and the restarts so far, in status.json
        assert st["state"] == "stalled", st
        # (a restart's copies are answered "already at the server": their first copies' dumps)
        assert "requests sent and unanswered, the oldest for" in st["stalled"] or (
            "answered requests whose dump has not appeared" in st["stalled"]), st["stalled"]
        assert st["stall_restarts"] == min(n + 1, 2) and st["stall_restarts_max"] == 2
        assert st["stall_final"] is (n == 2)
        assert any("stalled: no sample settled for" in e for e in st["last_errors"]), st["last_errors"]
    assert re.fullmatch(r"4 requests sent and unanswered, the oldest for \d+ s", runs[0][2]["stalled"])
    assert any(re.search(r"waiting on 4 requests sent and unanswered, the oldest for \d+ s; restart 1 of at most 2$",
                         e) for e in runs[0][2]["last_errors"]), runs[0][2]["last_errors"]
    assert any("stopped: 2 restarts since the last durable sample did not help" in e
               for e in runs[2][2]["last_errors"]), runs[2][2]["last_errors"]
    assert all(st["stalled_for_s"] >= WINDOW for _code, _took, st in runs)
    assert counts_of(job_dirs["out"]) == {"restarts": 2, "restarts_total": 2}
    assert not hard_exits   # each run ended on its own

    # the server answers again (a person restarted it): the next start extracts the rest, and
    # the first settled sample puts the count of stalls in a row back at 0 (the total stays)
    async def answered(server):
        return await one_run(job_dirs, server, ds, hard_exits)
    code, _took, st = run(with_server(job_dirs, answered))
    assert code == jobmod.EXIT_COMPLETE and st["state"] == "complete" and st["stalled"] == ""
    assert st["stall_restarts"] == 0 and st["stall_restarts_total"] == 2
    check_outputs(job_dirs["out"], samples)


class WedgedServer(StandinServer):
    """Takes every request, the capture check's prompt too, and never answers it: the fleet's stand-in past
    SGLANG_STANDIN_HANG_AFTER as a restarted run meets it, whose first request is its capture check."""

    async def generate(self, request):
        await self._stopping.wait()
        return web.json_response({"error": "going away"}, status=503)


def test_a_stall_on_the_capture_checks_prompt_says_so_not_nothing_sent(job_dirs):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", make_samples(3))

    async def body():
        server = await WedgedServer(job_dirs["dump"]).start()
        try:
            return await one_run(job_dirs, server, ds, [], stall_restarts_max=0)
        finally:
            await server.stop()
    code, _took, st = run(body())
    assert code == jobmod.EXIT_STALLED and st["state"] == "stalled", st
    assert re.fullmatch(r"the capture check's prompt sent and unanswered for \d+ s", st["stalled"]), st["stalled"]


def test_a_hung_drain_is_a_stall_and_the_process_ends_even_if_the_drain_never_returns(job_dirs, monkeypatch):
    samples = make_samples(3)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    release = threading.Event()
    original = drain.Drainer.drain

    def hung_drain(self, path, sample):
        release.wait(60)
        return original(self, path, sample)
    monkeypatch.setattr(drain.Drainer, "drain", hung_drain)
    hard_exits = []

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, stall_window=WINDOW, stall_restarts_max=0)
        # the run cannot end on its own (its drains are stuck): the watchdog ends the process
        # after its grace; here that step lets the drains go, so that the test can end
        job = jobmod.Job(cfg, torch, watchdog_factory=watchdog_factory(
            hard_exits, grace=0.5, on_hard_exit=release.set))
        return await asyncio.wait_for(job.run_async(), 60)
    try:
        code = run(with_server(job_dirs, body))
    finally:
        release.set()
    st = status_of(job_dirs["out"])
    assert hard_exits == [jobmod.EXIT_STALLED] and code == jobmod.EXIT_STALLED
    assert st["state"] == "stalled" and st["stall_final"] is True
    assert "3 dumps waiting for the drain, the oldest for" in st["stalled"], st["stalled"]
    assert any("stopped: 0 restarts" in e for e in st["last_errors"]), st["last_errors"]


def test_a_server_that_is_not_healthy_is_waited_for_not_a_stall(job_dirs):
    samples = make_samples(2)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    hard_exits = []

    async def body(server):
        server.healthy = False
        cfg = config_for(job_dirs, ds, server.url, stall_window=WINDOW, stall_restarts_max=0,
                         health_timeout=3 * WINDOW)
        job = jobmod.Job(cfg, torch, watchdog_factory=watchdog_factory(hard_exits))
        return await asyncio.wait_for(job.run_async(), 60)
    code = run(with_server(job_dirs, body))
    st = status_of(job_dirs["out"])
    # the server's own unit restarts it; the job's health wait ran out (exit 1, restarted), no stall
    assert code == jobmod.EXIT_INCOMPLETE and st["state"] == "incomplete" and st["stalled"] == ""
    assert counts_of(job_dirs["out"])["restarts_total"] == 0 and not hard_exits


@pytest.mark.parametrize("key,value", [("stall_window", 0), ("stall_window", float("inf")),
                                       ("stall_window", True), ("stall_restarts_max", -1),
                                       ("stall_restarts_max", 1.5)])
def test_the_config_refuses_a_bad_window_or_bound_naming_it(job_dirs, key, value):
    with pytest.raises(configmod.ConfigError, match=f"^{key}="):
        config_for(job_dirs, "/d.jsonl", "http://127.0.0.1:1", **{key: value})


def test_the_stand_in_server_wedged_through_the_jobs_command_line(job_dirs, tmp_path):
    """As systemd runs it: exit 3 restarts, exit 4 is the end; status.json says why each time."""
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    site = tmp_path / "server"
    site.mkdir()
    with standin_server(site, "", env={"SGLANG_STANDIN_HANG_AFTER": "1"}) as server:
        conf = tmp_path / "job.json"
        conf.write_text(json.dumps(dict(
            job="testjob", dataset=str(ds), output_dir=job_dirs["out"], dump_dir=str(server["dump"]),
            server_url=server["url"], model_path=str(site / "model"), concurrency=2,
            poll_interval=0.05, status_interval=0.2, output_free_floor_bytes=0, output_free_resume_bytes=0,
            shm_high=1.0, shm_low=1.0, stall_window=WINDOW, stall_restarts_max=1,
            # the stand-in started here has no return_hidden_states: the capture check is test_capture_check's
            capture_check=False)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.join(ROOT, "roles", "extraction_job", "files"), os.environ.get("PYTHONPATH", "")]))
        codes, states = [], []
        for _restart in range(3):
            proc = subprocess.run([sys.executable, "-m", "eagle3_extraction_job", "run", "--config", str(conf)],
                                  env=env, capture_output=True, text=True, timeout=90, check=False)
            codes.append(proc.returncode)
            states.append(status_of(job_dirs["out"]))
            if proc.returncode != jobmod.EXIT_STALL_RESTART:
                break
    assert codes == [jobmod.EXIT_STALL_RESTART, jobmod.EXIT_STALLED], (codes, proc.stdout[-2000:])
    first, last = states
    # the one answered request is durable; then 2 requests wait at the server for good
    assert first["samples_done"] == 1 and first["state"] == "stalled" and first["stall_restarts"] == 1
    assert "2 requests sent and unanswered" in first["stalled"]
    assert last["state"] == "stalled" and last["stall_final"] is True and last["stall_restarts"] == 1
    assert "ERROR stalled: no sample settled for" in proc.stdout, proc.stdout[-2000:]
