# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job through one sample's failure and through what would stop every sample.

One refused sample is recorded and the rest go on; a drain that cannot go on ends the job
at once, loudly; the end of a run waits for the drain under way; a finished row whose
file is gone is redone; no directory entry is trusted before it is on the disk.
"""
import concurrent.futures
import json
import logging
import os
import sqlite3
import stat
import threading
import time

from ansible_collections.eagle3.extraction.plugins.module_utils.shard_verify import verify_shard
from job_helpers import config_for, make_samples, torch, until, write_dataset, write_dump
from test_job_run import check_outputs, run, with_server
from eagle3_extraction_job import drain, manifest
from eagle3_extraction_job import job as jobmod

TOO_LONG = "The input (5000 tokens) is longer than the model's context length (4096 tokens)."


def failures(out):
    db = sqlite3.connect(os.path.join(out, "manifest.sqlite"))
    try:
        return dict(db.execute("SELECT sample_id, reason FROM failures"))
    finally:
        db.close()


def test_a_sample_the_server_refuses_is_recorded_and_the_rest_go_on(job_dirs):
    samples = make_samples(8)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    refused_id = samples[3][0]

    async def body(server, refuse):
        server.refuse = refuse
        cfg = config_for(job_dirs, ds, server.url)
        job = jobmod.Job(cfg, torch)
        code = await job.run_async()
        return code, job.snapshot(), list(server.received)
    code, snap, _sent = run(with_server(job_dirs, lambda s: body(s, {f"testjob-{refused_id}": (400, TOO_LONG)})))
    # the others are all there; the refused one is recorded with the server's reason, and
    # the job stops with the status systemd does not restart (a restart is refused again)
    assert code == jobmod.EXIT_REFUSED
    assert snap["samples_done"] == 7 and snap["samples_failed"] == 1 and snap["state"] == "incomplete"
    assert any(refused_id in e and "context length" in e for e in snap["last_errors"])
    assert "HTTP 400" in failures(job_dirs["out"])[refused_id]
    # named by its line too, where the user fixes it: in the status and in verify
    assert any(e.startswith(f"{refused_id} (line 4): ") for e in snap["last_errors"]), snap["last_errors"]
    assert any(p.startswith(f"{refused_id} (line 4): not extracted")
               for p in verify_shard(job_dirs["out"])["problems"])
    check_outputs_except(job_dirs["out"], samples, refused_id)
    # the server fixed (a longer context): the next start sends that sample alone
    code, snap, sent = run(with_server(job_dirs, lambda s: body(s, {})))
    assert code == jobmod.EXIT_COMPLETE and sent == [f"testjob-{refused_id}"]
    assert snap["samples_failed"] == 0
    check_outputs(job_dirs["out"], samples)


def test_a_refusal_whose_body_is_not_utf8_is_recorded_as_failed(job_dirs):
    # before: resp.text() raised UnicodeDecodeError, the sample was never recorded as failed and the
    # job crashed the same way at every restart
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    refused_id = samples[1][0]

    async def body(server):
        server.refuse = {f"testjob-{refused_id}": (422, b"\xff\xfe bad \x80 body")}
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED
    assert snap["samples_done"] == 3 and snap["samples_failed"] == 1
    assert failures(job_dirs["out"])[refused_id].endswith("HTTP 422: \ufffd\ufffd bad \ufffd body")
    check_outputs_except(job_dirs["out"], samples, refused_id)


def check_outputs_except(out, samples, missing_id):
    db = sqlite3.connect(os.path.join(out, "manifest.sqlite"))
    done = {r[0] for r in db.execute("SELECT sample_id FROM samples WHERE state = 'done'")}
    db.close()
    assert done == {s[0] for s in samples} - {missing_id}


def test_a_retry_that_meets_its_first_copy_still_at_the_server_waits_for_that_copy(job_dirs):
    # try 1 times out while the server goes on with it; try 2 gets SGLang's
    # 400 "Duplicate request ID": the first copy's dump is the answer, nothing is refused
    samples = make_samples(3)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    slow = f"testjob-{samples[1][0]}"

    async def body(server):
        server.hold = {slow: 1.0}
        cfg = config_for(job_dirs, ds, server.url, request_timeout=0.3, ack_timeout=3.0)
        job = jobmod.Job(cfg, torch)
        return await job.run_async(), job.snapshot(), list(server.received)
    code, snap, sent = run(with_server(job_dirs, body))
    assert sent.count(slow) >= 2
    assert code == jobmod.EXIT_COMPLETE and snap["samples_failed"] == 0
    assert failures(job_dirs["out"]) == {}
    check_outputs(job_dirs["out"], samples)


def _failing_write(exc):
    def write(self, relpath, payload, before_link=None):
        raise exc
    return write


def test_a_drain_that_fails_ends_the_job_at_once_and_says_why(job_dirs, monkeypatch):
    # torch wraps a failed write in RuntimeError: not a disk that passes, not one sample's dump
    monkeypatch.setattr(drain.Drainer, "write", _failing_write(
        RuntimeError("[enforce fail at inline_container.cc:626] PytorchStreamWriter failed writing file")))
    samples = make_samples(20)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, ack_timeout=30.0, max_attempts=8)
        job = jobmod.Job(cfg, torch)
        started = time.monotonic()
        code = await job.run_async()
        return code, time.monotonic() - started, job
    code, took, job = run(with_server(job_dirs, body))
    # not 8 tries of 30 s of ack timeouts: ended by the drain's failure, restartable
    assert code == jobmod.EXIT_INCOMPLETE and took < 10
    status = json.loads(open(job.cfg.effective_status_file, encoding="utf-8").read())
    assert status["state"] == "failed"
    assert any("drain" in e and "PytorchStreamWriter" in e for e in status["last_errors"])


def test_dumps_from_another_capture_than_the_outputs_stop_the_job_for_good(job_dirs, monkeypatch):
    def mismatch(self, dump):
        raise manifest.ManifestMismatch("manifest.sqlite was made with sglang_version='0.5.14', "
                                        "this run has sglang_version='0.5.23'")
    monkeypatch.setattr(drain.Drainer, "_check_provenance", mismatch)
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and snap["state"] == "failed"
    assert any("sglang_version" in e for e in snap["last_errors"])


def test_a_full_disk_in_sqlite_is_waited_out_not_the_end(job_dirs, monkeypatch):
    # sqlite's "database or disk is full" is no OSError: it is the output disk all the same
    real_write = drain.Drainer.write
    left = {"fails": 2}

    def write(self, relpath, payload, before_link=None):
        if left["fails"]:
            left["fails"] -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return real_write(self, relpath, payload, before_link)
    monkeypatch.setattr(drain.Drainer, "write", write)
    monkeypatch.setattr(jobmod, "DISK_RETRY_S", 0.05)
    samples = make_samples(4)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async()
    assert run(with_server(job_dirs, body)) == jobmod.EXIT_COMPLETE
    check_outputs(job_dirs["out"], samples)


def test_the_end_of_a_run_waits_for_the_drain_under_way(job_dirs, monkeypatch):
    # a drain still running when the sending ends must not be drained again by the final
    # pass (the manifest's unique key failed, and 'complete' could be computed too early)
    started = threading.Event()
    real_drain = drain.Drainer.drain

    def slow_drain(self, path, sample):
        started.set()
        time.sleep(0.5)
        return real_drain(self, path, sample)
    monkeypatch.setattr(drain.Drainer, "drain", slow_drain)
    samples = make_samples(1)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    write_dump(job_dirs["dump"], f"testjob-{samples[0][0]}", samples[0][1])

    async def body():
        job = jobmod.Job(config_for(job_dirs, ds, "http://127.0.0.1:9"), torch)
        job.pool = concurrent.futures.ThreadPoolExecutor(4)
        job.load_dataset()
        job.open_output()

        async def send_all(_todo):   # the sending ends while the dump is being drained
            await until(started.is_set, "the drain started", step=0.01)
        job._send_all = send_all  # pylint: disable=protected-access
        await job._send_and_drain([])  # pylint: disable=protected-access
        assert not job.draining
        await job.drain_pass()
        job.pool.shutdown(wait=True)
        job.manifest.close()
    run(body())
    check_outputs(job_dirs["out"], samples)


def test_a_finished_row_whose_file_is_gone_is_extracted_again(job_dirs):
    samples = make_samples(5)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async(), list(server.received)
    assert run(with_server(job_dirs, body))[0] == jobmod.EXIT_COMPLETE
    db = sqlite3.connect(os.path.join(job_dirs["out"], "manifest.sqlite"))
    (lost,) = db.execute("SELECT path FROM samples WHERE sample_id = ?", (samples[2][0],)).fetchone()
    db.close()
    os.unlink(os.path.join(job_dirs["out"], lost))   # its entry never reached the disk
    code, sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_COMPLETE and sent == [f"testjob-{samples[2][0]}"]
    check_outputs(job_dirs["out"], samples)


def test_a_rows_dir_another_thread_made_is_used_only_once_its_entry_is_durable(tmp_path, monkeypatch):
    order = []
    made = threading.Event()
    real_makedirs = drain.makedirs_durable

    def slow_makedirs(path, mode=0o755):
        os.makedirs(path, exist_ok=True)
        made.set()
        time.sleep(0.3)          # the maker's fsync of the parent, under way
        real_makedirs(path, mode)
        order.append("maker fsynced")
    monkeypatch.setattr(drain, "makedirs_durable", slow_makedirs)
    out = str(tmp_path / "out")
    os.makedirs(out)
    m = manifest.open_manifest(out)
    drainer = drain.Drainer(torch, m, out)
    rows = os.path.join(out, "rows_0-2000")
    maker = threading.Thread(target=drainer._durable_dir, args=(rows,))  # pylint: disable=protected-access
    maker.start()
    made.wait(5)
    assert os.path.isdir(rows)            # visible to the other thread already
    drainer._durable_dir(rows)  # pylint: disable=protected-access
    order.append("other thread goes on")
    maker.join()
    m.close()
    assert order == ["maker fsynced", "other thread goes on"]


def test_the_shard_dir_and_its_parents_are_fsynced_into_their_parents(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(manifest, "fsync_dir", synced.append)
    manifest.makedirs_durable(str(tmp_path / "a" / "b" / "c"))
    assert synced == [str(tmp_path), str(tmp_path / "a"), str(tmp_path / "a" / "b")]


def test_status_json_is_the_owners_alone_and_holds_no_key(job_dirs):
    key = "sk-test-0123456789abcdef"
    samples = make_samples(3)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    refused = f"testjob-{samples[0][0]}"

    async def body(server):
        # a server that echoes what it got, the Authorization header included
        server.refuse = {refused: (400, f"bad request\nAuthorization: Bearer {key}\n")}
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch, api_key=key)
        await job.run_async()
        return job.cfg.effective_status_file
    path = run(with_server(job_dirs, body, api_key=key))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = open(path, encoding="utf-8").read()
    assert key not in text and "Authorization: Bearer ********" in text
    assert key not in json.dumps(failures(job_dirs["out"]))


def test_a_token_id_beyond_the_models_vocabulary_is_a_bad_line_and_the_rest_go_on(job_dirs, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 8, "vocab_size": 1000}))
    samples = make_samples(4)
    beyond = ("s99999", [5, 6, 1000, 7], [0, 0, 1, 1])   # 1000 is not below vocab_size 1000
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples + [beyond])

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url, model_path=str(model)), torch)
        return await job.run_async(), job.snapshot(), list(server.received)
    code, snap, sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_COMPLETE and snap["bad_lines"] == 1
    assert "testjob-s99999" not in sent
    check_outputs(job_dirs["out"], samples)


def test_conversations_without_a_tokenizer_refuse_the_start_naming_the_tokenizer(job_dirs):
    # before: every conversation line became a bad line and the run ended "complete" (with a hub name
    # that cannot load and a conversations-only dataset: 0 of 0 samples, exit 0)
    samples = make_samples(3)
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    chat_line = json.dumps({"id": "c1", "conversations": turns})
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples, extra_lines=[chat_line])

    def no_tokenizer(_path, **_kw):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files of Qwen/Qwen3-8B")

    async def body(server):
        cfg = config_for(job_dirs, ds, server.url, tokenizer_path="Qwen/Qwen3-8B")
        job = jobmod.Job(cfg, torch, tokenizer_factory=no_tokenizer)
        return await job.run_async(), job.snapshot(), list(server.received)
    code, snap, sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and snap["state"] == "refused" and sent == []
    assert any("the tokenizer cannot be loaded from tokenizer_path='Qwen/Qwen3-8B'" in e
               and "couldn't connect" in e and "extraction_job_tokenizer_path" in e for e in snap["last_errors"])


def test_the_roles_check_refuses_a_tokenizer_that_cannot_load_before_any_start(job_dirs, caplog):
    # the configure step runs `check` before the units start: the tokenizer is loaded there, as the run loads it,
    # when (and only when) the dataset has a conversation line
    from eagle3_extraction_job import cli  # pylint: disable=import-outside-toplevel
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    mixed = write_dataset(job_dirs["root"] / "mixed.jsonl", make_samples(2),
                          extra_lines=[json.dumps({"id": "c1", "conversations": turns})])
    tokenized = write_dataset(job_dirs["root"] / "tokenized.jsonl", make_samples(2))
    asked = []

    def no_tokenizer(path, **_kw):
        asked.append(path)
        raise OSError(f"{path} is not a local folder and is not a valid model identifier")
    cfg = config_for(job_dirs, mixed, "http://127.0.0.1:9", tokenizer_path="Qwen/Qwen3-8B")
    assert cli.check_environment(cfg, logging.getLogger("t"), tokenizer_factory=no_tokenizer) == jobmod.EXIT_REFUSED
    assert asked == ["Qwen/Qwen3-8B"]
    assert "the tokenizer cannot be loaded from tokenizer_path='Qwen/Qwen3-8B'" in caplog.text
    cfg = config_for(job_dirs, tokenized, "http://127.0.0.1:9", tokenizer_path="Qwen/Qwen3-8B")
    assert cli.check_environment(cfg, logging.getLogger("t"), tokenizer_factory=no_tokenizer) == 0
    assert asked == ["Qwen/Qwen3-8B"]
    cfg = config_for(job_dirs, mixed, "http://127.0.0.1:9")
    assert cli.check_environment(cfg, logging.getLogger("t"), tokenizer_factory=lambda _p, **_kw: object()) == 0


def test_the_roles_check_refuses_an_output_dir_in_memory(job_dirs, caplog, monkeypatch):
    from eagle3_extraction_job import cli, space  # pylint: disable=import-outside-toplevel
    cfg = config_for(job_dirs, write_dataset(job_dirs["root"] / "d.jsonl", make_samples(1)), "http://127.0.0.1:9")
    assert cli.check_environment(cfg, logging.getLogger("t")) == 0
    monkeypatch.setattr(space, "filesystem_type", lambda _path: "tmpfs")
    assert cli.check_environment(cfg, logging.getLogger("t")) == jobmod.EXIT_REFUSED
    assert f"output_dir={cfg.output_dir!r} is on a tmpfs" in caplog.text


def test_a_job_whose_output_dir_is_on_a_tmpfs_refuses_before_writing_a_sample(job_dirs):
    samples = make_samples(2)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    out = job_dirs["root"] / "fast" / "out"

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url, output_dir=str(out)), torch,
                         filesystem_type_fn=lambda path: "tmpfs" if path.startswith(str(out.parent)) else "ext4")
        return await job.run_async(), job.snapshot(), list(server.received)
    code, snap, sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and snap["state"] == "refused" and sent == []
    assert any("is on a tmpfs" in e and "extraction_job_output_root" in e for e in snap["last_errors"])
    # the status says why (status.yml reads it there); no manifest, no sample
    assert sorted(os.listdir(out)) == ["status.json"]


def test_a_dataset_whose_every_line_is_bad_refuses_the_start(job_dirs):
    # before: "complete", 0 of 0 samples, exit 0: a job that extracted nothing had succeeded
    ds = write_dataset(job_dirs["root"] / "d.jsonl", [], extra_lines=["{not json", json.dumps({"id": "x"})])

    async def body(server):
        job = jobmod.Job(config_for(job_dirs, ds, server.url), torch)
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED and snap["state"] == "refused"
    assert any("every line of the dataset" in e and "(2 lines)" in e and "line 1" in e for e in snap["last_errors"])


def test_a_refused_sample_the_user_accepts_is_not_sent_again_and_the_shard_completes(job_dirs):
    """One refused sample left no way to a passing verify (a restart sends it, is refused, exits 2): named in
    accept_failed (extraction_job_accept_failed), it is not sent again, the shard ends complete, and verify given
    the same list passes naming it by its line; an accepted id that did not fail changes nothing."""
    samples = make_samples(5)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    refused_id, other_id = samples[2][0], samples[4][0]
    refuse = {f"testjob-{refused_id}": (400, TOO_LONG)}

    async def body(server, **over):
        server.refuse = refuse
        job = jobmod.Job(config_for(job_dirs, ds, server.url, **over), torch)
        return await job.run_async(), job.snapshot(), list(server.received)
    code, _snap, _sent = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_REFUSED
    code, snap, sent = run(with_server(job_dirs, lambda s: body(s, accept_failed=[refused_id, other_id])))
    assert code == jobmod.EXIT_COMPLETE and snap["state"] == "complete" and sent == []
    card = json.loads(open(os.path.join(job_dirs["out"], "dataset_card.json"), encoding="utf-8").read())
    assert card["complete"] is True and card["samples"] == 4
    report = verify_shard(job_dirs["out"], accept_failed=[refused_id])
    assert report["problems"] == [] and report["accepted"][0].startswith(f"{refused_id} (line 3): refused")
    assert verify_shard(job_dirs["out"])["problems"]   # not accepted: still named


def test_a_sample_accepted_before_it_fails_completes_the_shard_in_the_run_it_fails(job_dirs):
    samples = make_samples(3)
    ds = write_dataset(job_dirs["root"] / "d.jsonl", samples)
    refused_id = samples[1][0]

    async def body(server):
        server.refuse = {f"testjob-{refused_id}": (400, TOO_LONG)}
        job = jobmod.Job(config_for(job_dirs, ds, server.url, accept_failed=[refused_id]), torch)
        return await job.run_async(), job.snapshot()
    code, snap = run(with_server(job_dirs, body))
    assert code == jobmod.EXIT_COMPLETE and snap["state"] == "complete" and snap["samples_failed"] == 1
