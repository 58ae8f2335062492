# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/status.yml and playbooks/verify.yml (and their modules) on real job output.

Three shards are extracted here with the job against the stand-in server, laid out as
the role lays them out (<root>/<job>/shard-<i>-of-3); the playbooks then run with the
controller's ansible-playbook against localhost.
"""
import asyncio
import json
import os
import shutil
import sqlite3
import subprocess

import pytest

from job_helpers import ROOT, StandinServer, config_for, make_samples, torch, write_dataset
from eagle3_extraction_job import job as jobmod

PLAYBOOK_BIN = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
pytestmark = [pytest.mark.skipif(not os.path.exists(PLAYBOOK_BIN),
                                 reason="the controller venv (.venv) is not built"),
              # the deadline of each test (tests/conftest.py): a playbook run of up to 300 s, and the jobs before it
              pytest.mark.timeout(600)]
SAMPLES = make_samples(45)


@pytest.fixture
def output_root(job_dirs):
    ds = write_dataset(job_dirs["root"] / "d.jsonl", SAMPLES)
    root = job_dirs["root"] / "outputs"

    async def body():
        server = await StandinServer(job_dirs["dump"]).start()
        try:
            for i in range(3):
                cfg = config_for(job_dirs, ds, server.url, shard_index=i, shard_count=3,
                                 output_dir=str(root / "testjob" / f"shard-{i}-of-3"))
                assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
        finally:
            await server.stop()
    asyncio.run(body())
    return root


def playbook(name, root, *extra, callback="ansible.builtin.default"):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK=callback, ANSIBLE_NOCOLOR="1")
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + ":" + env["PATH"]
    argv = [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", os.path.join(ROOT, "playbooks", name),
            "-e", f"{name.split('.')[0]}_hosts=localhost", "-e", f"extraction_job_output_root={root}",
            "-e", "extraction_job_name=testjob", *extra]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_verify_proves_every_sample_exactly_once(output_root):
    result = playbook("verify.yml", output_root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verified: {len(SAMPLES)} samples exactly once" in result.stdout


def test_verify_names_a_damaged_file_a_partial_file_and_a_missing_shard(output_root):
    shard0 = output_root / "testjob" / "shard-0-of-3"
    db = sqlite3.connect(shard0 / "manifest.sqlite")
    sample_id, relpath = db.execute("SELECT sample_id, path FROM samples LIMIT 1").fetchone()
    db.close()
    with open(shard0 / relpath, "r+b") as f:
        f.seek(200)
        f.write(b"\x00\x01\x02")
    (shard0 / "rows_0-2000" / ".data_99.ckpt.1.tmp").write_bytes(b"half")
    shutil.rmtree(output_root / "testjob" / "shard-2-of-3")
    result = playbook("verify.yml", output_root)
    assert result.returncode != 0
    out = result.stdout
    assert f"{sample_id}: {relpath} does not match its sha256" in out
    assert ".data_99.ckpt.1.tmp: a partial file" in out
    assert "no host holds shard(s) 2 of 3" in out


def copy_shard(output_root, index, name):
    src = output_root / "testjob" / f"shard-{index}-of-3"
    dst = output_root / "testjob" / name
    shutil.copytree(src, dst)
    return dst


def test_a_handed_over_shard_whose_first_host_came_back_is_counted_once(output_root):
    # shard 1 handed to another host; the first host came back with its own, partial copy
    copy = copy_shard(output_root, 1, "shard-1b-of-3")
    db = sqlite3.connect(copy / "manifest.sqlite")
    rows = db.execute("SELECT sample_id, path FROM samples ORDER BY idx").fetchall()
    for _sample_id, relpath in rows[len(rows) // 2:]:
        os.unlink(copy / relpath)
    db.execute("DELETE FROM samples WHERE idx >= (SELECT MIN(idx) FROM samples) + ?", (len(rows) // 2,))
    db.commit()
    db.close()
    card = json.loads((copy / "dataset_card.json").read_text())
    card.update(complete=False, samples=len(rows) // 2)
    (copy / "dataset_card.json").write_text(json.dumps(card))
    # and a complete copy of shard 2 as well (the first host finished it after coming back)
    copy_shard(output_root, 2, "shard-2b-of-3")
    result = playbook("verify.yml", output_root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verified: {len(SAMPLES)} samples exactly once" in result.stdout
    assert "is stored twice" not in result.stdout
    assert result.stdout.count("is a leftover copy of shard 1") == 1
    assert result.stdout.count("is a leftover copy of shard 2") == 1


def test_verify_finds_two_copies_of_a_shard_that_disagree(output_root):
    copy = copy_shard(output_root, 1, "shard-1b-of-3")
    db = sqlite3.connect(copy / "manifest.sqlite")
    db.execute("UPDATE samples SET sample_id = 'not-in-the-other' WHERE idx = (SELECT MIN(idx) FROM samples)")
    db.commit()
    db.close()
    result = playbook("verify.yml", output_root)
    assert result.returncode != 0
    assert "shard 1 is in 2 places that disagree" in result.stdout


def test_status_prints_one_table_with_totals(output_root):
    status_file = output_root / "testjob" / "shard-1-of-3" / "status.json"
    status = json.loads(status_file.read_text())
    status.update(state="running", samples_done=3, tokens_per_s=1000.0, eta_s=7200, pid=os.getpid())
    status_file.write_text(json.dumps(status))
    result = playbook("status.yml", output_root)
    assert result.returncode == 0, result.stdout + result.stderr
    # one block (msg: |-) whose header is one line: before, a YAML list folded 'BAD LINES' over two lines
    assert "msg: |-" in result.stdout
    (header,) = [line.split() for line in result.stdout.splitlines() if line.split()[:2] == ["HOST", "SHARD"]]
    assert header[-3:] == ["FAILED", "BAD_LINES", "ERRORS"], header
    lines = [line for line in result.stdout.splitlines() if "localhost" in line or "TOTAL" in line]
    table = "\n".join(lines)
    assert table.count("complete") == 2
    # the pid is this test, not a job: the table must say the job is not running
    assert "stopped (was running)" in table
    total = [line for line in lines if "TOTAL" in line][0]
    assert f"{len(SAMPLES) - status['samples_total'] + 3}" in total.split()
    # a stopped shard with samples left ends at no time: not its last status.json's 2h00m
    (stopped,) = [line for line in lines if "stopped (was running)" in line]
    assert stopped.split().count("stopped") == 2 and "2h00m" not in table   # its state and its ETA


def test_status_until_complete_fails_while_samples_are_left(output_root):
    # make demo loops on this: the table each time, rc 0 only once every sample is done
    assert playbook("status.yml", output_root, "-e", "status_until_complete=true").returncode == 0
    status_file = output_root / "testjob" / "shard-2-of-3" / "status.json"
    status = json.loads(status_file.read_text())
    status.update(state="running", samples_done=1)
    status_file.write_text(json.dumps(status))
    result = playbook("status.yml", output_root, "-e", "status_until_complete=true")
    assert result.returncode != 0
    assert f"{len(SAMPLES) - status['samples_total'] + 1} of {len(SAMPLES)} samples done" in result.stdout
    assert "TOTAL" in result.stdout


def test_a_path_in_the_job_name_is_refused_not_read_as_another_job(output_root):
    """The name 'testjob' of a job beside the one asked for, reached through a path in the name: status showed
    that job's shards and verify passed on its output. A trailing newline was "no shard output found"."""
    (output_root / "mine").mkdir()
    for value in ("../testjob", "testjob\n"):
        for name in ("status.yml", "verify.yml"):
            result = playbook(name, output_root / "mine",
                              "-e", json.dumps({"extraction_job_name": value}))
            assert result.returncode != 0, result.stdout
            assert "verified:" not in result.stdout and "complete" not in result.stdout
            assert f"extraction_job_name={value!r} is not allowed" in result.stdout, result.stdout


def status_json(result):
    """The report status.yml prints with status_format=json, as a script reads it (README "Running an
    extraction"): ansible.posix's json callback, the task's msg read as JSON."""
    run = json.loads(result.stdout)
    (msg,) = [host["msg"] for play in run["plays"] for task in play["tasks"]
              if task["task"]["name"] == "Show the report as JSON" for host in task["hosts"].values()]
    return json.loads(msg)


def test_status_as_json_is_the_report_for_a_script_with_or_without_until_complete(output_root):
    result = playbook("status.yml", output_root, "-e", "status_format=json", callback="ansible.posix.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = status_json(result)
    assert sorted(s["shard_index"] for s in report["shards"]) == [0, 1, 2]
    assert {s["state"] for s in report["shards"]} == {"complete"} and report["totals"]["complete"] is True
    assert report["totals"]["samples_done"] == report["totals"]["samples_total"] == len(SAMPLES)
    assert report["hosts"] == [{"host": "localhost", "error": None, "shards": 3}]
    # status_until_complete: the report, then rc 0 once every sample is done, else a failure
    assert playbook("status.yml", output_root, "-e", "status_format=json", "-e", "status_until_complete=true",
                    callback="ansible.posix.json").returncode == 0
    status_file = output_root / "testjob" / "shard-2-of-3" / "status.json"
    status_file.write_text(json.dumps(dict(json.loads(status_file.read_text()), state="running", samples_done=1)))
    result = playbook("status.yml", output_root, "-e", "status_format=json", "-e", "status_until_complete=true",
                      callback="ansible.posix.json")
    assert result.returncode != 0
    assert status_json(result)["totals"]["complete"] is False


@pytest.mark.parametrize("name, option, value, words", [
    ("status.yml", "status_hosts", "no_such_group", "matches no host of the inventory"),
    ("status.yml", "status_format", "yaml", "status_format must be one of: table, json, got: yaml"),
    ("verify.yml", "verify_hosts", "no_such_group", "matches no host of the inventory"),
    ("status.yml", "status_until_complete", "maybe", "'maybe' is not a valid boolean"),
    ("verify.yml", "verify_checksums", "maybe", "'maybe' is not a valid boolean"),
])
def test_an_option_that_would_check_nothing_or_is_no_boolean_is_refused(tmp_path, name, option, value, words):
    # before: a selection of no host exited 0, and 'maybe' was false (verify without checksums)
    result = playbook(name, tmp_path, "-e", f"{option}={value}")
    assert result.returncode != 0
    assert words in result.stdout and option in result.stdout


def test_repair_redoes_exactly_the_damaged_and_missing_samples_and_keeps_the_damaged_file(output_root, job_dirs):
    # before: verify named a damaged file and nothing redid it (its row stayed done)
    shard0 = output_root / "testjob" / "shard-0-of-3"
    db = sqlite3.connect(shard0 / "manifest.sqlite")
    (damaged_id, damaged_path), (missing_id, missing_path) = db.execute(
        "SELECT sample_id, path FROM samples ORDER BY idx LIMIT 2").fetchall()
    db.close()
    with open(shard0 / damaged_path, "r+b") as f:   # one flipped bit, the size unchanged
        f.seek(os.path.getsize(shard0 / damaged_path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 1]))
    damaged_bytes = (shard0 / damaged_path).read_bytes()
    os.unlink(shard0 / missing_path)
    # the units' start is systemd's, not here: the job is run below as the unit would run it
    result = playbook("repair.yml", output_root, "--skip-tags", "repair_start")
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())   # the callback folds long lines
    assert f"{damaged_id}: {damaged_path} does not match its sha256: moved to {shard0}/damaged/" in out
    assert f"{missing_id}: {missing_path} is missing" in out
    assert "shard-0-of-3: 2 samples to redo" in out
    assert not (shard0 / damaged_path).exists()
    kept = [p for p in (shard0 / "damaged").iterdir() if not p.name.endswith(".reason")]
    assert [p.read_bytes() for p in kept] == [damaged_bytes]   # moved aside, not deleted
    assert not [p for p in (shard0 / "damaged").iterdir() if p.name.endswith(".ckpt")]

    async def body():
        server = await StandinServer(job_dirs["dump"]).start()
        try:
            cfg = config_for(job_dirs, job_dirs["root"] / "d.jsonl", server.url, shard_index=0, shard_count=3,
                             output_dir=str(shard0))
            assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_COMPLETE
            return server.received
        finally:
            await server.stop()
    assert sorted(asyncio.run(body())) == sorted(f"testjob-{s}" for s in (damaged_id, missing_id))
    result = playbook("verify.yml", output_root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verified: {len(SAMPLES)} samples exactly once" in result.stdout
    # nothing left to redo: the repair changes nothing and starts nothing
    result = playbook("repair.yml", output_root, "--skip-tags", "repair_start")
    assert result.returncode == 0 and "changed=0" in result.stdout, result.stdout + result.stderr


def test_a_refused_sample_passes_verify_once_accepted_and_an_accepted_id_must_have_failed(job_dirs):
    """One refused sample left no way to a passing verify: extraction_job_accept_failed names it, by its id."""
    ds = write_dataset(job_dirs["root"] / "d.jsonl", SAMPLES[:6])
    root = job_dirs["root"] / "outputs"
    refused = SAMPLES[2][0]

    async def body():
        server = await StandinServer(job_dirs["dump"]).start()
        server.refuse = {f"testjob-{refused}": (400, "longer than the context")}
        try:
            cfg = config_for(job_dirs, ds, server.url, output_dir=str(root / "testjob" / "shard-0-of-1"))
            assert await jobmod.Job(cfg, torch).run_async() == jobmod.EXIT_REFUSED
        finally:
            await server.stop()
    asyncio.run(body())
    result = playbook("verify.yml", root)
    assert result.returncode != 0 and f"{refused} (line 3): not extracted" in result.stdout, result.stdout
    result = playbook("verify.yml", root, "-e", json.dumps({"extraction_job_accept_failed": [refused]}))
    assert result.returncode == 0, result.stdout + result.stderr
    said = " ".join(result.stdout.split())   # the message as one line (the callback wraps it)
    assert ("verified: 5 samples exactly once" in said and "1 failed sample accepted as not extracted "
            f"(extraction_job_accept_failed): {refused} (line 3): refused by the server" in said), said[-3000:]
    for accept, says in (([refused, SAMPLES[0][0]], f"names {SAMPLES[0][0]}, which did not fail"),
                         (["*"], "extraction_job_accept_failed=['*']")):
        result = playbook("verify.yml", root, "-e", json.dumps({"extraction_job_accept_failed": accept}))
        assert result.returncode != 0 and says in " ".join(result.stdout.split()), result.stdout
