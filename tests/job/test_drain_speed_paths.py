# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain's fast paths keep its guarantees.

Several drain threads share one group commit (reservations and ``done`` rows of
many samples in one transaction, one directory fsync a group), the reservation
is committed while the dump is checked, and the sha256 is computed beside the
write. None of that may let a sample read as done before its file and directory
entry are durable, delete a dump before that, or store a sample twice after a
crash.
"""
import concurrent.futures
import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":   # the crash helper below runs this file as a script
    sys.path.insert(0, HERE)

from job_helpers import HIDDEN, LAYERS, expected_tensors, torch, write_dump  # noqa: E402
from eagle3_extraction_job import ckpt_file, dataset, drain, manifest  # noqa: E402

IDS = [5, 9, 2, 7]
MASK = [0, 0, 1, 1]


def sample(n):
    ids = [n + 1, n + 2, n + 3, n + 4]
    return dataset.parse_record({"id": f"s{n}", "input_ids": ids, "loss_mask": MASK}), ids


def open_drainer(out):
    m = manifest.open_manifest(out)
    return drain.Drainer(torch, m, out, hidden_size=HIDDEN, captured_layers=LAYERS)


def done_rows(out):
    db = sqlite3.connect(os.path.join(out, "manifest.sqlite"))
    try:
        return db.execute("SELECT sample_id, path, state FROM samples ORDER BY idx").fetchall()
    finally:
        db.close()


class Events:
    """What happened, in order, across threads: fsyncs, links, unlinks, commits."""

    def __init__(self):
        self.lock = threading.Lock()
        self.log = []

    def add(self, *event):
        with self.lock:
            self.log.append(event)

    def first(self, *event):
        return self.log.index(event)


@pytest.mark.parametrize("mode,beside", [(m, False) for m in ckpt_file.MODES] + [("early", True)])
def test_concurrent_drains_are_done_only_after_file_dir_and_commit_are_durable(
        job_dirs, monkeypatch, mode, beside):
    """8 threads, 24 samples, in each write mode (pieces of 8 KiB, so that the early
    writeback and O_DIRECT paths run), and with the NaN/Inf check beside the write: for
    each sample, file fsync < link < dir fsync < commit < dump deleted."""
    monkeypatch.setattr(ckpt_file, "MODE", mode)
    monkeypatch.setattr(drain, "CHECK_BESIDE_WRITE", beside)
    monkeypatch.setattr(ckpt_file, "PIECE", 8192)
    monkeypatch.setattr(ckpt_file, "PARALLEL_HASH_BYTES", 1024)
    ev = Events()
    real_fsync, real_link, real_unlink = os.fsync, os.link, os.unlink

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        time.sleep(0.005)   # a disk's fsync takes time: lets groups form
        real_fsync(fd)
        ev.add("fsync", kind, path)

    def link(src, dst):
        real_link(src, dst)
        ev.add("link", dst)

    def unlink(path):
        real_unlink(path)
        ev.add("unlink", path)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "unlink", unlink)
    d = open_drainer(job_dirs["out"])

    def trace(sql):
        if sql.startswith("UPDATE samples SET state = 'done'"):
            ev.add("done-row", sql.rsplit("sample_id = '", 1)[1].split("'")[0])
        elif sql == "COMMIT":
            ev.add("commit")
    d.manifest._db.set_trace_callback(trace)   # pylint: disable=protected-access
    work = []
    for n in range(24):
        s, ids = sample(n)
        work.append((write_dump(job_dirs["dump"], f"job-s{n}", ids), s))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda a: d.drain(*a), work))
    assert [r[0] for r in results] == ["done"] * 24
    for (dump, s), (_outcome, info) in zip(work, results):
        final = os.path.join(job_dirs["out"], info["path"])
        tmp_fsync = next(i for i, e in enumerate(ev.log) if e[:2] == ("fsync", "file")
                         and os.path.basename(e[2]).startswith("." + os.path.basename(final)))
        linked = ev.first("link", final)
        dir_fsync = next(i for i, e in enumerate(ev.log)
                         if i > linked and e == ("fsync", "dir", os.path.dirname(final)))
        row = ev.first("done-row", s.sample_id)
        commit = next(i for i, e in enumerate(ev.log) if i > row and e == ("commit",))
        deleted = ev.first("unlink", dump)
        assert tmp_fsync < linked < dir_fsync < commit < deleted, s.sample_id
    commits = sum(1 for e in ev.log if e == ("commit",))
    assert commits < 2 * 24   # grouped: fewer than a reservation and a finish a sample
    assert d.manifest.totals()["samples"] == 24
    rows = done_rows(job_dirs["out"])
    assert len({r[1] for r in rows}) == 24 and {r[2] for r in rows} == {"done"}
    assert sorted(os.listdir(os.path.join(job_dirs["out"], "rows_0-2000"))) == sorted(
        os.path.basename(r[1]) for r in rows)    # no temp file, no extra file
    d.manifest.close()


def test_reads_from_many_threads_while_drains_commit(job_dirs):
    """One sqlite connection used by several threads at once broke ("bad parameter or other
    API misuse", and rows read as None) on Python 3.12, where the old code failed this test;
    on this venv's 3.11 it did not show. is_done, totals and done_ids now read through a
    connection of their own, under its own lock."""
    m = manifest.open_manifest(job_dirs["out"])
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                m.is_done("s1")
                m.totals()
                m.done_ids()
        except Exception as exc:  # pylint: disable=broad-except
            errors.append(exc)

    def writer(n):
        m.reserve(f"s{n}", lambda idx: f"rows_0-2000/data_{idx}.ckpt")
        m.finish(f"s{n}", 4, 10, "0" * 64)
    readers = [threading.Thread(target=reader) for _reader in range(6)]
    for t in readers:
        t.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            list(pool.map(writer, range(200)))
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert errors == []
    assert m.totals()["samples"] == 200
    m.close()


def test_a_sample_does_not_read_done_before_its_group_commits(job_dirs, monkeypatch):
    m = manifest.open_manifest(job_dirs["out"])
    m.reserve("s1", lambda idx: f"rows_0-2000/data_{idx}.ckpt")
    os.makedirs(os.path.join(job_dirs["out"], "rows_0-2000"))
    in_dir_fsync, release = threading.Event(), threading.Event()
    real = manifest.fsync_dir

    def slow_fsync_dir(path):
        in_dir_fsync.set()
        release.wait(10)
        real(path)
    monkeypatch.setattr(manifest, "fsync_dir", slow_fsync_dir)
    finisher = threading.Thread(target=m.finish, args=("s1", 4, 10, "0" * 64),
                                kwargs={"sync_dir": os.path.join(job_dirs["out"], "rows_0-2000")})
    finisher.start()
    assert in_dir_fsync.wait(10)
    assert m.is_done("s1") is None and m.totals()["samples"] == 0
    assert done_rows(job_dirs["out"]) == [("s1", "rows_0-2000/data_0.ckpt", "writing")]
    release.set()
    finisher.join(10)
    assert m.is_done("s1") == "rows_0-2000/data_0.ckpt"
    m.close()


def test_one_failing_statement_fails_only_its_own_caller(job_dirs):
    m = manifest.open_manifest(job_dirs["out"])
    inside, gate = threading.Event(), threading.Event()

    def hold(_db):
        inside.set()
        gate.wait(10)
    first = m.submit(hold)       # holds the committer: the rest queue up behind it
    assert inside.wait(10)
    a = m.reserve_async("a", lambda idx: f"rows_0-2000/data_{idx}.ckpt")
    dup = m.reserve_async("a", lambda idx: f"rows_0-2000/data_{idx}.ckpt")
    other = m.reserve_async("b", lambda idx: f"rows_0-2000/data_{idx}.ckpt")
    gate.set()
    first.wait()
    assert a.wait() == (0, "rows_0-2000/data_0.ckpt")
    with pytest.raises(sqlite3.IntegrityError):
        dup.wait()
    assert other.wait() == (1, "rows_0-2000/data_1.ckpt")
    assert m.group_commits == 2   # the three queued behind the first went in one transaction
    assert [r[0] for r in done_rows(job_dirs["out"])] == ["a", "b"]
    m.close()


@pytest.mark.parametrize("beside", [False, True])
def test_a_rejected_dump_leaves_no_reservation_no_file_and_the_dump(job_dirs, monkeypatch, beside):
    """Checked before the write, or beside it (the file then written before the check
    ends): a dump with NaN/Inf gets no name, no row, and keeps its dump for the rejection."""
    monkeypatch.setattr(drain, "CHECK_BESIDE_WRITE", beside)
    d = open_drainer(job_dirs["out"])
    checked = threading.Event()
    real = drain.check_finite

    def slow_check(*args):
        time.sleep(0.2 if beside else 0)   # beside: the write is done before the check is
        checked.set()
        return real(*args)
    monkeypatch.setattr(drain, "check_finite", slow_check)
    s, ids = sample(1)

    def inf(p):
        p["aux_hidden_state"][0, 1, 2] = float("inf")
    dump = write_dump(job_dirs["dump"], "job-s1", ids, inf)
    with pytest.raises(drain.DumpRejected, match="aux_hidden_state holds NaN or Inf"):
        d.drain(dump, s)
    assert checked.is_set() and os.path.exists(dump)
    assert done_rows(job_dirs["out"]) == [] and d.manifest.interrupted() == []
    rows_dir = os.path.join(job_dirs["out"], "rows_0-2000")
    assert not os.path.isdir(rows_dir) or os.listdir(rows_dir) == []   # nor a temp file
    good, good_ids = sample(2)
    assert d.drain(write_dump(job_dirs["dump"], "job-s2", good_ids), good)[0] == "done"
    d.manifest.close()


@pytest.mark.parametrize("variant,mode,piece,beside", [
    ("early", "early", 16 << 20, False), ("direct:4", "direct", 4 << 20, False),
    ("early:64+beside", "early", 64 << 20, True)])
def test_the_benches_write_variants(monkeypatch, variant, mode, piece, beside):
    for name in ("MODE", "PIECE"):
        monkeypatch.setattr(ckpt_file, name, getattr(ckpt_file, name))
    monkeypatch.setattr(drain, "CHECK_BESIDE_WRITE", drain.CHECK_BESIDE_WRITE)
    drain.set_write_variant(variant)
    assert (ckpt_file.MODE, ckpt_file.PIECE, drain.CHECK_BESIDE_WRITE) == (mode, piece, beside)


@pytest.mark.parametrize("variant", ["fast", "early+after", "early:x", "early:", "early:0", "",
                                     "early\n", "direct:4+beside+beside"])
def test_a_bad_write_variant_is_refused_and_changes_nothing(variant):
    before = (ckpt_file.MODE, ckpt_file.PIECE, drain.CHECK_BESIDE_WRITE)
    with pytest.raises(ValueError, match="is not MODE"):
        drain.set_write_variant(variant)
    assert (ckpt_file.MODE, ckpt_file.PIECE, drain.CHECK_BESIDE_WRITE) == before


def test_a_failed_write_leaves_no_temp_file_and_keeps_the_dump(job_dirs, monkeypatch):
    d = open_drainer(job_dirs["out"])
    s, ids = sample(1)
    dump = write_dump(job_dirs["dump"], "job-s1", ids)

    def full_disk(payload, f):
        f.write(b"x" * 100)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError):
        d.drain(dump, s)
    assert os.path.exists(dump) and done_rows(job_dirs["out"]) == []
    assert os.listdir(os.path.join(job_dirs["out"], "rows_0-2000")) == []
    d.manifest.close()


def test_the_sha256_hashed_beside_the_write_is_the_files(job_dirs, monkeypatch):
    monkeypatch.setattr(ckpt_file, "PARALLEL_HASH_BYTES", 64)   # the test tensors take that path too
    d = open_drainer(job_dirs["out"])
    s, ids = sample(1)
    _outcome, info = d.drain(write_dump(job_dirs["dump"], "job-s1", ids), s)
    with open(os.path.join(job_dirs["out"], info["path"]), "rb") as f:
        data = f.read()
    assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["bytes"] == len(data)
    assert torch.equal(torch.load(os.path.join(job_dirs["out"], info["path"]),
                                  weights_only=True)["hidden_state"], expected_tensors(ids)[1])
    d.manifest.close()


def _crash_in_finish(out, dump):
    """Run as a script: drain one dump and die (os._exit) right where finish would commit."""
    d = open_drainer(out)

    def crash(*_args, **_kwargs):
        os._exit(17)   # no cleanup, no commit: what a kill -9 or a power cut leaves
    d.manifest.finish = crash
    d.drain(dump, sample(1)[0])


@pytest.mark.parametrize("where", ["after the file is linked", "after the reservation"])
def test_a_crash_between_write_and_commit_redoes_the_sample_once(job_dirs, where):
    s, ids = sample(1)
    dump = write_dump(job_dirs["dump"], "job-s1", ids)
    rows_dir = os.path.join(job_dirs["out"], "rows_0-2000")
    if where == "after the file is linked":
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), job_dirs["out"], dump],
                              timeout=120, check=False, capture_output=True)
        assert proc.returncode == 17, proc.stderr.decode()[-2000:]
        assert os.listdir(rows_dir) == ["data_0.ckpt"]     # durable, linked, not committed
    else:
        m = manifest.open_manifest(job_dirs["out"])
        m.reserve("s1", lambda idx: f"rows_0-2000/data_{idx}.ckpt")
        m.close()
    assert os.path.exists(dump)
    assert done_rows(job_dirs["out"]) == [("s1", "rows_0-2000/data_0.ckpt", "writing")]
    # the restart: recover, then drain the same dump again
    d = open_drainer(job_dirs["out"])
    drain.recover(d.manifest, job_dirs["out"])
    outcome, info = d.drain(dump, s)
    assert outcome == "done" and not os.path.exists(dump)
    assert done_rows(job_dirs["out"]) == [("s1", info["path"], "done")]
    assert os.listdir(rows_dir) == [os.path.basename(info["path"])]   # one file, no double
    saved = torch.load(os.path.join(job_dirs["out"], info["path"]), weights_only=True)
    assert torch.equal(saved["aux_hidden_state"], expected_tensors(ids)[2])
    d.manifest.close()


if __name__ == "__main__":
    _crash_in_finish(sys.argv[1], sys.argv[2])
