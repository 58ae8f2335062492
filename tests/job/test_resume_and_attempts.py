# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A resume sends only what is left, and each sample gets exactly ``max_attempts`` tries.

Counted at the server: the requests of a resume (none for a sample that is done or whose
dump waits in the dump dir), and every try of a sample (the ones the server failed too).
"""
import asyncio
import collections
import os
import sqlite3

import pytest
from aiohttp import web

from job_helpers import HIDDEN, LAYERS, StandinServer, config_for, make_samples, torch, write_dataset, write_dump
from test_job_run import check_outputs, output_files
from eagle3_extraction_job import job as jobmod
from eagle3_extraction_job import space


class CountingServer(StandinServer):
    """The stand-in, failing the tries of chosen rids first and counting every try of each rid.

    ``fail``: rid -> how many of its first tries fail; ``how``: ``503`` (the server is busy)
    or ``no dump`` (answered 200, but no dump appears)."""

    def __init__(self, dump_dir, fail=None, how="503", stop_after=None):
        super().__init__(dump_dir)
        self.stop_after = stop_after
        self.fail = dict(fail or {})
        self.how = how
        self.tries = collections.Counter()

    async def generate(self, request):
        body = await request.json()
        if body.get("return_hidden_states"):   # the capture check's prompt: counted in self.checks
            return await super().generate(request)
        rid = body["rid"]
        self.tries[rid] += 1
        if self.fail.get(rid, 0) > 0:
            self.fail[rid] -= 1
            if self.how == "503":
                return web.json_response({"error": "busy"}, status=503)
            return web.json_response({"text": "x", "meta_info": {"id": rid}})
        return await super().generate(request)


def run_job(job_dirs, cfg_over, server_kw=None, usage_fn=space.usage, dataset=None):
    async def body():
        server = await CountingServer(job_dirs["dump"], **(server_kw or {})).start()
        try:
            job = jobmod.Job(config_for(job_dirs, dataset, server.url, **cfg_over), torch,
                             usage_fn=usage_fn)
            code = await job.run_async()
            return code, job.snapshot(), server
        finally:
            await server.stop()
    return asyncio.run(body())


# a try that is answered without a dump fails after ack_timeout; the last try's dump must
# still be drained within it on a loaded machine
ACK_TIMEOUT = {"503": 5.0, "no dump": 1.0}


def rid(sample):
    return f"testjob-{sample[0]}"


def done_ids(out):
    db = sqlite3.connect(os.path.join(out, "manifest.sqlite"))
    try:
        return {r[0] for r in db.execute("SELECT sample_id FROM samples WHERE state = 'done'")}
    finally:
        db.close()


def test_a_resume_sends_only_what_is_left_and_needs_room_only_for_that(job_dirs):
    samples = make_samples(30)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    # the first run: the server goes away after 12 requests, the job ends incomplete
    code, _snap, _server = run_job(job_dirs, {"max_attempts": 2, "health_timeout": 1.0},
                                   {"stop_after": 12}, dataset=ds)
    assert code == jobmod.EXIT_INCOMPLETE
    done = done_ids(job_dirs["out"])
    assert len(done) == 12
    # two more were answered after the job stopped: their dumps wait in the dump dir
    waiting = [s for s in samples if s[0] not in done][:2]
    for sample in waiting:
        write_dump(job_dirs["dump"], rid(sample), sample[1])
    rest = [s for s in samples if s[0] not in done and s not in waiting]
    before = {p: v for p, v in output_files(job_dirs["out"]).items() if p.endswith(".ckpt")}
    # the output disk has room for what is left to send, not one sample more
    need = space.estimate(len(rest), sum(len(s[1]) for s in rest), HIDDEN, LAYERS)
    free = int(need * 1.10) + space.FILE_OVERHEAD // 2

    def usage(path):
        if path == job_dirs["out"]:
            return space.Usage(10**12, free)
        return space.Usage(10**12, 10**12)

    code, snap, server = run_job(job_dirs, {"space_margin": 0.10}, usage_fn=usage, dataset=ds)
    assert code == jobmod.EXIT_COMPLETE, snap["last_errors"]
    # one request for each sample that was neither done nor waiting as a dump, none other
    assert sorted(server.tries.elements()) == sorted(rid(s) for s in rest)
    after = output_files(job_dirs["out"])
    assert {p: after[p] for p in before} == before   # the first run's files untouched
    check_outputs(job_dirs["out"], samples)


@pytest.mark.parametrize("how", ["503", "no dump"])
def test_a_sample_that_fails_all_tries_but_the_last_is_extracted(job_dirs, how):
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    flaky = rid(samples[1])
    code, snap, server = run_job(job_dirs, {"max_attempts": 3, "ack_timeout": ACK_TIMEOUT[how]},
                                 {"fail": {flaky: 2}, "how": how}, dataset=ds)
    assert code == jobmod.EXIT_COMPLETE, snap["last_errors"]
    assert server.tries[flaky] == 3
    assert snap["samples_failed"] == 0
    check_outputs(job_dirs["out"], samples)


@pytest.mark.parametrize("how", ["503", "no dump"])
def test_a_sample_that_fails_every_try_is_given_up_after_max_attempts_and_the_rest_go_on(
        job_dirs, how):
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    hopeless = rid(samples[2])
    code, snap, server = run_job(job_dirs, {"max_attempts": 3, "ack_timeout": ACK_TIMEOUT[how]},
                                 {"fail": {hopeless: 100}, "how": how}, dataset=ds)
    # tried exactly max_attempts times, recorded as failed; the others are all extracted
    assert server.tries[hopeless] == 3
    assert code == jobmod.EXIT_INCOMPLETE and snap["state"] == "incomplete"
    assert snap["samples_failed"] == 1 and snap["samples_done"] == 3
    assert any(samples[2][0] in e and "gave up after 3 tries" in e for e in snap["last_errors"])
    assert done_ids(job_dirs["out"]) == {s[0] for s in samples} - {samples[2][0]}
