# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain's write modes (ckpt_file): the same bytes, hash and size in each, and the
writeback started, the page cache dropped or O_DIRECT used where the mode says, with
the fsync still the last step before the file is linked."""
import hashlib
import io
import os
import threading

import pytest

from job_helpers import torch
from eagle3_extraction_job import ckpt_file, drain, manifest

PAYLOAD = {"input_ids": torch.arange(300, dtype=torch.int64),
           "hidden_state": torch.randn(1, 300, 64).to(torch.bfloat16),
           "aux_hidden_state": torch.randn(1, 300, 192).to(torch.bfloat16)}


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 8 KiB and the helper-thread hash from 1 KiB: the test tensors (38 and
    115 KB) are written in many pieces, with a partial last one."""
    monkeypatch.setattr(ckpt_file, "PIECE", 8192)
    monkeypatch.setattr(ckpt_file, "PARALLEL_HASH_BYTES", 1024)


def reference_bytes():
    buf = io.BytesIO()
    torch.save(PAYLOAD, buf)
    return buf.getvalue()


@pytest.mark.parametrize("mode", ckpt_file.MODES)
def test_every_mode_writes_the_same_bytes_with_their_hash_and_size(tmp_path, small_pieces, mode):
    drain.disable_zip_crc32(torch)
    path = str(tmp_path / "a.ckpt")
    with ckpt_file.CkptFile(path, mode, torch) as out:
        torch.save(PAYLOAD, out)
        out.sync()
    with open(path, "rb") as f:
        data = f.read()
    assert data == reference_bytes()
    assert out.size == len(data) and out.sha256.hexdigest() == hashlib.sha256(data).hexdigest()
    loaded = torch.load(path, weights_only=True)
    assert all(torch.equal(loaded[k], PAYLOAD[k]) for k in PAYLOAD)


def test_a_finished_file_is_never_opened_for_writing(tmp_path):
    path = tmp_path / "a.ckpt"
    path.write_bytes(b"finished")
    for mode in ckpt_file.MODES:
        with pytest.raises(FileExistsError):
            ckpt_file.CkptFile(str(path), mode, torch)
    assert path.read_bytes() == b"finished"


def test_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="write mode 'fast' is not one of buffered, early"):
        ckpt_file.CkptFile(str(tmp_path / "a.ckpt"), "fast", torch)
    assert not os.listdir(tmp_path)


class Calls:
    def __init__(self, monkeypatch):
        self.log = []
        self.lock = threading.Lock()
        real_sfr, real_fsync, real_fadvise = ckpt_file.sync_file_range, os.fsync, os.posix_fadvise
        real_open = os.open

        def sfr(fd, offset, nbytes, flags):
            self.add("sync_file_range", offset, nbytes, flags)
            real_sfr(fd, offset, nbytes, flags)

        def fsync(fd):
            self.add("fsync")
            real_fsync(fd)

        def fadvise(fd, offset, nbytes, advice):
            self.add("fadvise", offset, nbytes, advice)
            real_fadvise(fd, offset, nbytes, advice)

        def open_(path, flags, *args):
            self.add("open", bool(flags & os.O_DIRECT))
            return real_open(path, flags, *args)
        monkeypatch.setattr(ckpt_file, "sync_file_range", sfr)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "posix_fadvise", fadvise)
        monkeypatch.setattr(os, "open", open_)

    def add(self, *event):
        with self.lock:
            self.log.append(event)

    def names(self):
        return [e[0] for e in self.log]


def write_one(path, mode):
    with ckpt_file.CkptFile(path, mode, torch) as f:
        torch.save(PAYLOAD, f)
        f.sync()
    return f.size


def test_early_starts_each_pieces_writeback_as_written_and_still_fsyncs(
        tmp_path, small_pieces, monkeypatch):
    calls = Calls(monkeypatch)
    size = write_one(str(tmp_path / "a.ckpt"), "early")
    starts = [e for e in calls.log if e[0] == "sync_file_range"]
    assert len(starts) > 10 and {e[3] for e in starts} == {ckpt_file.WRITE}   # never waits
    # contiguous ranges from 0, each started once, and the fsync after the last
    assert starts[0][1] == 0 and all(a[1] + a[2] == b[1] for a, b in zip(starts, starts[1:]))
    assert starts[-1][1] + starts[-1][2] <= size
    assert calls.names()[-1] == "fsync" and calls.names().count("fsync") == 1


def test_stream_waits_for_and_drops_the_piece_before(tmp_path, small_pieces, monkeypatch):
    calls = Calls(monkeypatch)
    write_one(str(tmp_path / "a.ckpt"), "stream")
    waited = [e for e in calls.log if e[0] == "sync_file_range" and e[3] & ckpt_file.WAIT_AFTER]
    dropped = [e for e in calls.log if e[0] == "fadvise"]
    assert waited and [e[1:3] for e in waited] == [e[1:3] for e in dropped]
    assert {e[3] for e in dropped} == {os.POSIX_FADV_DONTNEED}
    assert calls.names()[-1] == "fsync"


def test_direct_uses_o_direct_and_truncates_the_padded_tail(tmp_path, small_pieces, monkeypatch):
    calls = Calls(monkeypatch)
    path = str(tmp_path / "a.ckpt")
    size = write_one(path, "direct")
    if ("open", True) not in calls.log:
        pytest.skip("this file system refuses O_DIRECT")
    assert size % ckpt_file.BLOCK and os.path.getsize(path) == size
    assert calls.names()[-1] == "fsync"


def test_direct_falls_back_to_the_page_cache_where_o_direct_is_refused(
        tmp_path, small_pieces, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, *args)
    monkeypatch.setattr(os, "open", no_direct)
    path = str(tmp_path / "a.ckpt")
    with ckpt_file.CkptFile(path, "direct", torch) as f:
        assert f.mode == "buffered"
        torch.save(PAYLOAD, f)
        f.sync()
    with open(path, "rb") as fh:
        assert fh.read() == reference_bytes()


@pytest.mark.parametrize("mode", ckpt_file.MODES)
def test_the_drain_in_each_mode_records_the_files_hash(job_dirs, small_pieces, monkeypatch, mode):
    from test_drain_speed_paths import open_drainer, sample, write_dump  # noqa: E501 pylint: disable=import-outside-toplevel
    monkeypatch.setattr(ckpt_file, "MODE", mode)
    d = open_drainer(job_dirs["out"])
    s, ids = sample(3)
    dump = write_dump(job_dirs["dump"], "job-s3", ids)
    outcome, info = d.drain(dump, s)
    with open(os.path.join(job_dirs["out"], info["path"]), "rb") as f:
        data = f.read()
    assert outcome == "done" and not os.path.exists(dump)
    assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["bytes"] == len(data)
    assert d.manifest.totals()["bytes"] == len(data)
    d.manifest.close()
    assert manifest.open_manifest(job_dirs["out"]).is_done(s.sample_id) == info["path"]


def test_the_jobs_drain_starts_the_writeback_during_the_write(job_dirs, small_pieces, monkeypatch):
    """The default mode (what the job runs) is the measured fastest, ``early``: the
    writeback of the file's pieces is started before its fsync, and the fsync still
    comes before the link."""
    from test_drain_speed_paths import open_drainer, sample, write_dump  # noqa: E501 pylint: disable=import-outside-toplevel
    calls = Calls(monkeypatch)
    real_link = os.link

    def link(src, dst):
        calls.add("link")
        real_link(src, dst)
    monkeypatch.setattr(os, "link", link)
    big = torch.randn(1, 4, 512).to(torch.bfloat16)   # pieces of 8 KiB: several a tensor

    d = open_drainer(job_dirs["out"])
    d.hidden_size = d.captured_layers = 0   # any width: the test's dump is wider
    s, ids = sample(2)
    dump = write_dump(job_dirs["dump"], "job-s2", ids,
                      lambda p: p.update(hidden_state=big, aux_hidden_state=big.repeat(1, 1, 3)))
    assert d.drain(dump, s)[0] == "done"
    names = [n for n in calls.names() if n in ("sync_file_range", "fsync", "link")]
    linked = names.index("link")
    file_fsync = max(i for i in range(linked) if names[i] == "fsync")
    assert "sync_file_range" in names[:file_fsync]
    assert "sync_file_range" not in names[file_fsync:]
    d.manifest.close()


def test_a_file_system_that_refuses_the_writeback_start_gets_the_file_all_the_same(
        tmp_path, small_pieces, monkeypatch):
    def refused(*_args):
        raise OSError(22, "Invalid argument")
    monkeypatch.setattr(ckpt_file, "sync_file_range", refused)
    path = str(tmp_path / "a.ckpt")
    with ckpt_file.CkptFile(path, "early", torch) as f:
        torch.save(PAYLOAD, f)
        f.sync()
    assert f.mode == "buffered"
    with open(path, "rb") as fh:
        assert fh.read() == reference_bytes()
