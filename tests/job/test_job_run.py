# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole job against a stand-in server on 127.0.0.1: send, drain, resume, refuse."""
import asyncio
import json
import os
import sqlite3

import pytest

from job_helpers import (StandinServer, config_for, expected_tensors, make_samples, torch,
                         until, write_dataset, write_dump)
from ansible_collections.eagle3.extraction.plugins.module_utils.dumps import aside_dir, aside_glob
from eagle3_extraction_job import job as jobmod
from eagle3_extraction_job import space


def run(coro):
    return asyncio.run(coro)


async def with_server(job_dirs, body, **server_kw):
    server = await StandinServer(job_dirs["dump"], **server_kw).start()
    try:
        return await body(server)
    finally:
        await server.stop()


def output_files(out):
    found = {}
    for root, _dirs, files in os.walk(out):
        for name in files:
            path = os.path.join(root, name)
            st = os.stat(path)
            found[os.path.relpath(path, out)] = (st.st_ino, st.st_mtime_ns)
    return found


def check_outputs(out, samples):
    """Every sample exactly once, equal to what the server computed, manifest == files."""
    db = sqlite3.connect(os.path.join(out, "manifest.sqlite"))
    rows = list(db.execute("SELECT sample_id, path, state, tokens, bytes FROM samples"))
    db.close()
    assert all(r[2] == "done" for r in rows)
    by_id = {r[0]: r for r in rows}
    assert sorted(by_id) == sorted(s[0] for s in samples) and len(rows) == len(samples)
    ckpts = sorted(p for p in output_files(out) if p.endswith(".ckpt"))
    assert ckpts == sorted(r[1] for r in rows)
    for sample_id, ids, mask in samples:
        path = os.path.join(out, by_id[sample_id][1])
        assert os.path.getsize(path) == by_id[sample_id][4]
        saved = torch.load(path, weights_only=True)
        exp_ids, final, aux = expected_tensors(ids)
        assert torch.equal(saved["input_ids"], exp_ids)
        assert saved["loss_mask"].tolist() == mask
        assert torch.equal(saved["hidden_state"], final)
        assert torch.equal(saved["aux_hidden_state"], aux)
    assert not [p for p in output_files(out) if p.endswith(".tmp")]


def test_a_shard_is_extracted_and_every_dump_drained(job_dirs):
    samples = make_samples(40)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples, extra_lines=["{broken"])

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url)
        job = jobmod.Job(cfg, torch)
        assert await job.run_async() == jobmod.EXIT_COMPLETE
        return job, server
    job, server = run(with_server(job_dirs, body))
    assert sorted(server.received) == sorted(f"testjob-{s[0]}" for s in samples)
    check_outputs(job_dirs["out"], samples)
    assert os.listdir(job_dirs["dump"]) == []
    with open(os.path.join(job_dirs["out"], "status.json"), encoding="utf-8") as f:
        status = json.load(f)
    assert status["state"] == "complete" and status["samples_done"] == 40
    assert status["tokens_done"] == sum(len(s[1]) for s in samples) == status["tokens_total"]
    assert status["bad_lines"] == 1 and status["errors"] == 0
    with open(os.path.join(job_dirs["out"], "dataset_card.json"), encoding="utf-8") as f:
        card = json.load(f)
    assert card["complete"] and card["samples"] == 40 and card["dataset_samples"] == 40
    assert card["captured_layers"] == "[2, 3, 4]" and card["sglang_version"] == "0.5.23"
    assert card["bytes"] == sum(os.path.getsize(os.path.join(job_dirs["out"], p))
                                for p in output_files(job_dirs["out"]) if p.endswith(".ckpt"))


def test_shards_over_three_hosts_cover_the_dataset_exactly_once(job_dirs):
    samples = make_samples(60)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    outs = [str(job_dirs["root"] / "out" / f"host{i}") for i in range(3)]

    async def body(server):
        for i in range(3):
            cfg = config_for(job_dirs, ds, server.url, shard_index=i, shard_count=3,
                             output_dir=outs[i])
            assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
        return server
    server = run(with_server(job_dirs, body))
    assert len(server.received) == 60 == len(set(server.received))
    ids = []
    for out in outs:
        db = sqlite3.connect(os.path.join(out, "manifest.sqlite"))
        ids += [r[0] for r in db.execute("SELECT sample_id FROM samples")]
        db.close()
    assert sorted(ids) == sorted(s[0] for s in samples)


def test_resume_sends_exactly_what_is_not_done_and_rewrites_nothing(job_dirs):
    samples = make_samples(30)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def first(server):
        # the server goes away after 12 requests: the job ends incomplete
        server.stop_after = 12
        cfg = config_for(job_dirs, ds, server.url, max_attempts=2, health_timeout=1.0)
        assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_INCOMPLETE
        return list(server.received)
    sent_first = run(with_server(job_dirs, first))
    assert len(sent_first) == 12
    before = output_files(job_dirs["out"])
    before_ckpt = {p: v for p, v in before.items() if p.endswith(".ckpt")}
    assert len(before_ckpt) == 12

    async def second(server):
        cfg = config_for(job_dirs, ds, server.url)
        assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
        return list(server.received)
    sent_second = run(with_server(job_dirs, second))
    assert sorted(sent_second) == sorted(set(f"testjob-{s[0]}" for s in samples)
                                         - set(sent_first))
    after = output_files(job_dirs["out"])
    assert {p: after[p] for p in before_ckpt} == before_ckpt   # same inodes, same mtimes
    check_outputs(job_dirs["out"], samples)


def test_a_kill_mid_job_resumes_without_loss_or_double(job_dirs):
    """The job is cancelled mid-run (a kill), with answered requests whose dumps wait."""
    samples = make_samples(40)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def killed(server):
        server.delay = 0.01
        cfg = config_for(job_dirs, ds, server.url, concurrency=8)
        task = asyncio.create_task(jobmod.Job(cfg, torch).run_async())
        await until(lambda: len(server.received) >= 15, "15 requests sent", step=0.005)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        # the server keeps dumping what it had accepted: those dumps are data
        return list(server.received)
    sent_first = set(run(with_server(job_dirs, killed)))
    leftover = set(os.listdir(job_dirs["dump"]))
    before = {p: v for p, v in output_files(job_dirs["out"]).items() if p.endswith(".ckpt")}

    async def resumed(server):
        cfg = config_for(job_dirs, ds, server.url)
        assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
        return list(server.received)
    sent_second = run(with_server(job_dirs, resumed))
    done_first = len(before)
    assert len(sent_second) == 40 - done_first - len(leftover)
    assert not set(sent_second) & {f"testjob-{n[:-3].split('-', 1)[1]}" for n in leftover}
    after = output_files(job_dirs["out"])
    assert {p: after[p] for p in before} == before
    check_outputs(job_dirs["out"], samples)
    assert sent_first  # the first run did send


def test_undrained_dumps_from_an_earlier_restart_are_drained_not_resent(job_dirs):
    samples = make_samples(10)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    # named as the sglang_server role names it (filter dumps_aside), found by the glob the role writes
    undrained = aside_dir(job_dirs["dump"], "20261201T000000Z")
    os.makedirs(undrained)
    for sample_id, ids, _mask in samples[:4]:
        write_dump(undrained, f"testjob-{sample_id}", ids)
    with open(os.path.join(undrained, "CAPTURE_STATS.json"), "w", encoding="utf-8") as f:
        f.write("{}")
    write_dump(undrained, "otherjob-s00001", samples[1][1])   # another job's: left alone

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, dump_dir_aside_glob=aside_glob(job_dirs["dump"]))
        assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
        return server.received
    sent = run(with_server(job_dirs, body))
    assert sorted(sent) == sorted(f"testjob-{s[0]}" for s in samples[4:])
    assert sorted(os.listdir(undrained)) == ["CAPTURE_STATS.json", "otherjob-s00001.pt"]
    check_outputs(job_dirs["out"], samples)


def test_retries_after_503_and_a_lost_dump(job_dirs):
    samples = make_samples(6)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body(server):
        server.fail_first = 3
        server.no_dump = {f"testjob-{samples[2][0]}"}
        cfg = config_for(job_dirs, ds, server.url, ack_timeout=0.3)

        async def allow_later():
            await asyncio.sleep(0.5)
            server.no_dump = set()
        asyncio.create_task(allow_later())
        assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
        return server.received
    sent = run(with_server(job_dirs, body))
    assert sent.count(f"testjob-{samples[2][0]}") >= 2   # a 200 without a dump is not done
    check_outputs(job_dirs["out"], samples)


def test_a_rejected_dump_is_kept_reported_and_resent_on_the_next_run(job_dirs):
    samples = make_samples(5)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    bad_rid = f"testjob-{samples[1][0]}"

    def nan(p):
        p["hidden_state"][0, 0, 0] = float("nan")

    async def body(server, mutate):
        server.mutate = mutate
        cfg = config_for(job_dirs, ds, server.url)
        job = jobmod.Job(cfg, torch)
        code = await job.run_async()
        return code, job.snapshot(), server.received
    code, snap, _sent = run(with_server(job_dirs, lambda s: body(s, {bad_rid: nan})))
    assert code == jobmod.EXIT_INCOMPLETE and snap["errors"] == 1
    assert "NaN" in snap["last_errors"][0] and samples[1][0] in snap["last_errors"][0]
    kept = os.listdir(os.path.join(job_dirs["out"], "rejected"))
    assert any(k.startswith(bad_rid + ".pt.") and not k.endswith(".reason") for k in kept)
    code, _snap, sent = run(with_server(job_dirs, lambda s: body(s, {})))
    assert code == jobmod.EXIT_COMPLETE and sent == [bad_rid]
    check_outputs(job_dirs["out"], samples)


def test_a_dump_rejected_in_two_runs_running_stops_the_job_instead_of_restarting_it(job_dirs):
    """The capture gives a sample the same bad dump every time (zeros, say): the first rejection is given another
    run (a NaN may be a passing fault), the second stops the shard with the status systemd does not restart,
    where it would otherwise restart it for ever, each run keeping one more copy of the dump in rejected/."""
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    bad = samples[2][0]

    def zeros(p):
        p["hidden_state"] = torch.zeros_like(p["hidden_state"])

    async def body(server):
        server.mutate = {f"testjob-{bad}": zeros}
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async(), job.snapshot()
    first, _snap = run(with_server(job_dirs, body))
    second, snap = run(with_server(job_dirs, body))
    assert (first, second) == (jobmod.EXIT_INCOMPLETE, jobmod.EXIT_REFUSED), (first, second)
    assert snap["samples_done"] == 3 and snap["samples_failed"] == 1 and snap["state"] == "incomplete", snap
    rejected_dir = os.path.join(job_dirs["out"], "rejected")
    assert (f"1 samples whose dumps were rejected in this run and the one before (kept in {rejected_dir})"
            in snap["last_errors"][-1]), snap["last_errors"]
    kept = [k for k in os.listdir(rejected_dir) if not k.endswith(".reason")]
    assert kept and all(k.startswith(f"testjob-{bad}.pt.") for k in kept), kept


def test_refuses_before_the_first_request_when_the_output_disk_is_too_small(job_dirs):
    samples = make_samples(10)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, hidden_size=7168)
        job = jobmod.Job(cfg, torch, usage_fn=lambda p: space.Usage(10**9, 10**5))
        code = await job.run_async()
        return code, job.snapshot(), server.received
    code, snap, sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and sent == []
    assert snap["state"] == "refused" and "57,360 bytes a token" in snap["last_errors"][0]


def test_backpressure_pauses_sending_above_the_high_watermark(job_dirs):
    samples = make_samples(8)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    full = {"on": True}

    def usage(path):
        if path == job_dirs["dump"] and full["on"]:
            return space.Usage(100, 10)            # 90 % used
        return space.Usage(10**12, 10**12)

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, shm_high=0.7, shm_low=0.5)
        job = jobmod.Job(cfg, torch, usage_fn=usage)
        task = asyncio.create_task(job.run_async())
        await asyncio.sleep(1.0)
        paused = (job.state, job.snapshot()["paused"], list(server.received))
        full["on"] = False
        assert await task == jobmod.EXIT_COMPLETE
        return paused
    state, reason, sent = run(with_server(job_dirs, body))
    assert state == "paused" and "high watermark" in reason and sent == []
    check_outputs(job_dirs["out"], samples)


def test_another_datasets_output_dir_is_refused(job_dirs):
    a = write_dataset(job_dirs["root"] / "a.jsonl", make_samples(3))
    b = write_dataset(job_dirs["root"] / "b.jsonl", make_samples(4))

    async def body(server):
        assert await jobmod.Job(config_for(job_dirs, a, server.url), torch).run_async() == 0
        job = jobmod.Job(config_for(job_dirs, b, server.url), torch)
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and "dataset_sha256" in snap["last_errors"][0]


def test_a_dataset_edited_in_place_is_refused_at_restart_and_the_output_is_left_as_it_was(job_dirs):
    # same path, same size and mtime, one token id changed: only its content says it is another
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    before = os.stat(ds)
    text = open(ds, encoding="utf-8").read()
    edited = text.replace(f"[{samples[2][1][0]}, ", f"[{samples[2][1][0] + 1}, ", 1)   # 62 -> 63
    assert edited != text and len(edited) == len(text)
    manifest = os.path.join(job_dirs["out"], "manifest.sqlite")

    def done_rows():
        with sqlite3.connect(manifest) as db:
            return db.execute("SELECT sample_id, path, state, sha256 FROM samples ORDER BY idx").fetchall()

    async def body(server):
        assert await jobmod.Job(config_for(job_dirs, ds, server.url), torch).run_async() == 0
        rows = done_rows()
        with open(ds, "w", encoding="utf-8") as f:
            f.write(edited)
        os.utime(ds, ns=(before.st_atime_ns, before.st_mtime_ns))
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return rows, await job.run_async(), job.snapshot(), len(server.received)
    rows, code, snap, sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and snap["state"] == "refused"
    assert "dataset_sha256" in snap["last_errors"][0]
    assert sent == len(samples)              # the first run's requests only
    assert done_rows() == rows
    check_outputs(job_dirs["out"], samples)


def test_a_wrong_api_key_stops_the_job_without_showing_the_key(job_dirs):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", make_samples(3))

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch, api_key="wrong-key-123")
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body, api_key="right"))
    assert code == jobmod.EXIT_REFUSED and "API key" in snap["last_errors"][0]
    assert "wrong-key-123" not in json.dumps(snap)
    # no answer of the server: extraction_job_outcome waits on, and names the refusal, not "running"
    assert snap["answered"] == 0


def test_the_status_counts_the_requests_the_server_answered(job_dirs):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", make_samples(3))

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_COMPLETE and snap["answered"] == 3


@pytest.mark.parametrize("key", ["right"])
def test_the_api_key_is_sent_as_bearer(job_dirs, key):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", make_samples(3))

    async def body(server):
        return await jobmod.Job(config_for(job_dirs, ds, server.url), torch,
                                api_key=key).run_async()
    assert run(with_server(job_dirs, body, api_key=key)) == jobmod.EXIT_COMPLETE


def test_a_server_that_never_answers_ends_the_run_incomplete_and_sends_nothing(job_dirs):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", make_samples(3))
    # a port nothing listens on: bind one, close it
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = config_for(job_dirs, ds, f"http://127.0.0.1:{port}", health_timeout=0.5)
    job = jobmod.Job(cfg, torch)
    assert run(job.run_async()) == jobmod.EXIT_INCOMPLETE
    snap = job.snapshot()
    assert snap["state"] == "incomplete" and "not answering" in snap["last_errors"][0]
    assert snap["samples_done"] == 0


def test_each_bad_line_is_counted_by_exactly_one_shard(job_dirs):
    # before: every shard reads the whole file and counted every bad line (3 shards: 3 x 4)
    samples = make_samples(30)
    bad = ["{broken", json.dumps({"id": 7, "input_ids": [1], "loss_mask": [1]}),
           json.dumps({"id": "mask", "input_ids": [1, 2], "loss_mask": [1]}),
           '{"id": "cut", "input_ids": [1, 2']
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples, extra_lines=bad)
    outs = [str(job_dirs["root"] / "out" / f"shard-{i}-of-3") for i in range(3)]

    async def body(server):
        for i in range(3):
            cfg = config_for(job_dirs, ds, server.url, shard_index=i, shard_count=3,
                             output_dir=outs[i])
            assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
    run(with_server(job_dirs, body))
    statuses, cards = [], []
    for out in outs:
        with open(os.path.join(out, "status.json"), encoding="utf-8") as f:
            statuses.append(json.load(f))
        with open(os.path.join(out, "dataset_card.json"), encoding="utf-8") as f:
            cards.append(json.load(f))
    assert sum(s["bad_lines"] for s in statuses) == len(bad)
    assert sum(c["bad_lines"] for c in cards) == len(bad)
    named = sorted(line.split(":", 1)[0] for c in cards for line in c["bad_lines_shown"])
    first = len(samples) + 1
    assert named == sorted([f"line {first} (no id)", f"line {first + 1} (id 7)",
                            f"line {first + 2} (id 'mask')", f"line {first + 3} (id 'cut')"])
