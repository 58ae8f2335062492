"""What a 72-hour extraction needs of the capture: nothing skipped silently, no stale
chunks held forever, nothing answered lost on a stop, a file written once, a full
disk that pauses, settings that would hang refused, lengths read in time."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import weakref

import pytest
import torch

from batches import FakeDeepseekModel, assert_dump, capture, dumped, load, make_batch

HEX_RID = "0123456789abcdef0123456789abcdef"


def stats_of(cap):
    cap._write_stats(force=True)
    with open(os.path.join(cap.dump_dir, capture.STATS_FILE)) as f:
        return json.load(f)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


# -- nothing is skipped silently ---------------------------------------------------


def test_every_request_not_dumped_is_counted_by_reason_and_logged_once(new_capture, caplog):
    cap = new_capture(rid_prefix="job1-")
    with caplog.at_level(logging.WARNING):
        # the start-up warm-up: sglang's own rid before any other request
        cap.on_forward(*make_batch(["9f1c2b3a4d5e6f708192a3b4c5d6e7f8"], [3]))
        cap.on_forward(*make_batch(["HEALTH_CHECK_1", "job1-a", HEX_RID, "other-b"],
                                   [1, 4, 5, 2]))
        # a second client rid that looks like sglang's own, and a second health check
        cap.on_forward(*make_batch([HEX_RID.replace("0", "f"), "HEALTH_CHECK_2"], [2, 1]))
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["job1-a.pt"]
    stats = stats_of(cap)
    assert stats["dumped"] == 1
    assert stats["skipped"] == {
        "health_check": 2, "warmup": 1, "rid_rule": 2, "refused": 1,
        "incomplete": 0, "duplicate": 0, "write_failed": 0,
    }
    # each reason logged once, naming the rid that was first
    for reason in ("health_check", "warmup", "rid_rule", "refused"):
        assert caplog.text.count(f"counted as '{reason}'") == 1
    assert f"rid '{HEX_RID}'" in caplog.text


def test_a_chunked_hex_rid_is_counted_once_not_once_a_chunk(new_capture):
    cap = new_capture()
    cap.on_forward(*make_batch(["client-0"], [2]))
    cap.on_forward(*make_batch([HEX_RID], [4], [0], [12]))
    cap.on_forward(*make_batch([HEX_RID], [4], [4], [12]))
    cap.on_forward(*make_batch([HEX_RID], [4], [8], [12]))
    assert cap.flush(timeout=10)
    assert stats_of(cap)["skipped"]["rid_rule"] == 1


# -- aborted chunked prompts ---------------------------------------------------------


def test_a_prompt_sent_again_from_token_0_replaces_its_stale_chunks(new_capture):
    cap = new_capture()
    cap.on_forward(*make_batch(["retry"], [12], [0], [30], seed=1))  # then aborted
    retry = [make_batch(["retry"], [12], [0], [30], seed=2),
             make_batch(["retry"], [12], [12], [30], seed=3),
             make_batch(["retry"], [6], [24], [30], seed=4)]
    for b in retry:
        cap.on_forward(*b)
    assert cap.flush(timeout=10)
    want = [torch.cat([b[i + 1] for b in retry]) for i in range(3)]
    assert_dump(os.path.join(cap.dump_dir, "retry.pt"), *want, "retry")
    stats = stats_of(cap)
    assert stats["skipped"]["incomplete"] == 1  # the aborted attempt
    assert stats["partials"] == 0 and stats["partial_bytes"] == 0


def test_chunks_left_longer_than_the_bound_are_dropped_and_counted(new_capture):
    clock = Clock()
    cap = new_capture(clock=clock, partial_timeout=60)
    cap.on_forward(*make_batch(["gone"], [12], [0], [100]))
    assert cap.flush(timeout=10)
    assert stats_of(cap)["partials"] == 1
    clock.now += 61
    cap.on_forward(*make_batch(["next"], [3]))
    assert cap.flush(timeout=10)
    stats = stats_of(cap)
    assert stats["partials"] == 0 and stats["partial_bytes"] == 0
    assert stats["skipped"]["incomplete"] == 1
    # a late chunk of the dropped prompt is not stitched onto nothing
    cap.on_forward(*make_batch(["gone"], [88], [12], [100]))
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["next.pt"]
    report = open(os.path.join(cap.dump_dir, capture.ERROR_FILE)).read()
    assert "'gone'" in report and "SGLANG_HS_PARTIAL_TIMEOUT_S" in report


def test_memory_held_by_unfinished_prompts_stays_bounded(new_capture):
    one = make_batch(["p0"], [10], [0], [1000])
    per_prompt = sum(t.numel() * t.element_size() for t in one[1:])
    cap = new_capture(max_partial_bytes=3 * per_prompt)
    for i in range(10):
        cap.on_forward(*make_batch([f"p{i}"], [10], [0], [1000], seed=i))
        assert cap.flush(timeout=10)
        assert stats_of(cap)["partial_bytes"] <= 3 * per_prompt
    stats = stats_of(cap)
    assert stats["partials"] == 3
    assert stats["skipped"]["incomplete"] == 7  # the oldest went first
    assert set(cap._pending) == {"p7", "p8", "p9"}


# -- write once ---------------------------------------------------------------------


def test_a_rids_first_complete_file_is_never_replaced(new_capture, caplog):
    cap = new_capture()
    first = make_batch(["once"], [5], seed=1)
    cap.on_forward(*first)
    assert cap.flush(timeout=10)
    path = os.path.join(cap.dump_dir, "once.pt")
    before = os.stat(path)
    # retracted during decode and prefilled again with the token it generated
    with caplog.at_level(logging.WARNING):
        cap.on_forward(*make_batch(["once"], [6], seed=2))
        assert cap.flush(timeout=10)
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == \
        (before.st_ino, before.st_mtime_ns, before.st_size)
    assert_dump(path, *first[1:], "once")
    assert stats_of(cap)["skipped"]["duplicate"] == 1
    assert "counted as 'duplicate'" in caplog.text
    assert not [f for f in os.listdir(cap.dump_dir) if f.endswith(".tmp")]


# -- a full /dev/shm pauses ------------------------------------------------------------


def _fill(path):
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == 28
    finally:
        os.close(fd)


def test_a_full_dump_dir_pauses_the_writers_and_kills_nothing(small_tmpfs, new_capture):
    cap = new_capture(dump_dir=small_tmpfs, writer_threads=1, max_pending=1)
    _fill(small_tmpfs)  # something else (NCCL segments, another writer) fills it
    first = make_batch(["waits"], [64], seed=1)
    cap.on_forward(*first)
    assert not cap.flush(timeout=1.5), "the write should wait for space"
    assert cap.failure is None
    assert stats_of(cap)["waiting_for_space"] is True
    assert not [f for f in os.listdir(small_tmpfs) if f.endswith(".tmp")]

    # the forward is held (the one buffer is taken), not killed
    second = make_batch(["after"], [8], seed=2)
    held = threading.Thread(target=cap.on_forward, args=second, daemon=True)
    held.start()
    held.join(0.5)
    assert held.is_alive()

    os.unlink(small_tmpfs / "filler")  # the drain made room
    held.join(10)
    assert not held.is_alive()
    assert cap.flush(timeout=15)
    assert dumped(small_tmpfs) == ["after.pt", "waits.pt"]
    assert_dump(small_tmpfs / "waits.pt", *first[1:], "waits")
    assert_dump(small_tmpfs / "after.pt", *second[1:], "after")
    stats = stats_of(cap)
    assert stats["waiting_for_space"] is False and stats["space_wait_s"] > 0.5
    assert stats["skipped"]["write_failed"] == 0


def test_a_dump_dir_that_is_gone_still_fails_loudly(tmp_path, new_capture, caplog):
    cap = new_capture(dump_dir=tmp_path / "dump")
    cap.on_forward(*make_batch(["ok"], [4]))
    assert cap.flush(timeout=10)
    os.rename(tmp_path / "dump", tmp_path / "moved")  # someone took it away
    with caplog.at_level(logging.ERROR):
        cap.on_forward(*make_batch(["lost"], [4]))
        assert cap.flush(timeout=10)
    assert "No such file or directory" in caplog.text
    with pytest.raises(capture.HiddenStateCaptureError, match="No such file or directory"):
        cap.on_forward(*make_batch(["next"], [2]))


# -- configurations that would hang --------------------------------------------------


SPLIT = "holds only its share of a batch's rows"
NO_AUX = "the files would lack aux layers"


@pytest.mark.parametrize("settings,reason", [
    ({"enable_attn_tp_input_scattered": True}, SPLIT),
    ({"enable_prefill_cp": True}, SPLIT),
    ({"attn_cp_size": 2}, SPLIT),
    ({"enable_dp_attention": True}, SPLIT),
    ({"enable_two_batch_overlap": True}, NO_AUX),
])
def test_settings_that_split_a_batch_or_skip_aux_layers_are_refused_at_start(
        tmp_path, settings, reason):
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    model = FakeDeepseekModel()
    for rank in (0, 1):  # every rank refuses, so the server stops whichever starts first
        with pytest.raises(capture.HiddenStateCaptureError) as err:
            capture.install(model, tp_rank=rank, environ=env, parallel=settings)
        (name, value), = settings.items()
        assert f"{name}={value}" in str(err.value)
        other_reason = NO_AUX if reason == SPLIT else SPLIT
        assert reason in str(err.value) and other_reason not in str(err.value)
    assert model.capture_aux_hidden_states is False
    assert not (tmp_path / "dump").exists()


def _fake_sglang(monkeypatch, server_args=None, parallel=None, two_batch_overlap=False):
    """sglang.srt.server_args (and 0.5.23's runtime_context) as sys.modules entries."""
    import types

    def get_exec():  # 0.5.23's resolved exec namespace, exec.overlap among its bags
        return types.SimpleNamespace(overlap=types.SimpleNamespace(
            enable_two_batch_overlap=two_batch_overlap, enable_single_batch_overlap=False))

    def get_global_server_args():
        if server_args is None:
            raise RuntimeError("get_global_server_args() is retired")  # 0.5.23
        return server_args

    mods = {
        "sglang": types.ModuleType("sglang"),
        "sglang.srt": types.ModuleType("sglang.srt"),
        "sglang.srt.server_args": types.ModuleType("sglang.srt.server_args"),
        "sglang.srt.runtime_context": types.ModuleType("sglang.srt.runtime_context"),
    }
    mods["sglang.srt.server_args"].get_global_server_args = get_global_server_args
    mods["sglang.srt.runtime_context"].get_parallel = lambda: parallel
    mods["sglang.srt.runtime_context"].get_exec = get_exec
    mods["sglang.srt.runtime_context"].get_server_args = lambda: types.SimpleNamespace(
        chunked_prefill_size=4096)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)


class Unset:
    """0.5.23's ParallelContext raises for fields nobody published."""

    def __init__(self, **values):
        self.values = values

    def __getattr__(self, name):
        if name in self.values:
            return self.values[name]
        raise RuntimeError(f"parallel name {name!r} has not been written in this process")


def test_the_settings_are_read_from_0_5_14_server_args(monkeypatch):
    import types

    args = types.SimpleNamespace(enable_attn_tp_input_scattered=False, enable_prefill_cp=False,
                                 enable_prefill_context_parallel=True, attn_cp_size=1,
                                 enable_dp_attention=False, chunked_prefill_size=2048)
    _fake_sglang(monkeypatch, server_args=args)
    assert capture._sglang_parallel_settings() == {"enable_prefill_context_parallel": True}
    assert capture._sglang_chunked_prefill_size() == 2048


def test_two_batch_overlap_is_read_from_0_5_14_server_args(monkeypatch):
    import types

    args = types.SimpleNamespace(enable_two_batch_overlap=True, enable_dp_attention=False)
    _fake_sglang(monkeypatch, server_args=args)
    assert capture._sglang_parallel_settings() == {"enable_two_batch_overlap": True}
    args.enable_two_batch_overlap = False
    assert capture._sglang_parallel_settings() == {}


def test_two_batch_overlap_is_read_from_0_5_23_exec_overlap(monkeypatch):
    _fake_sglang(monkeypatch, parallel=Unset(attn_dp_size=1), two_batch_overlap=True)
    assert capture._sglang_parallel_settings() == {"enable_two_batch_overlap": True}
    _fake_sglang(monkeypatch, parallel=Unset(attn_dp_size=1), two_batch_overlap=False)
    assert capture._sglang_parallel_settings() == {}


def test_the_settings_are_read_from_0_5_23_runtime_context(monkeypatch):
    _fake_sglang(monkeypatch, parallel=Unset(enable_attn_tp_input_scattered=True, attn_dp_size=1))
    assert capture._sglang_parallel_settings() == {"enable_attn_tp_input_scattered": True}
    assert capture._sglang_chunked_prefill_size() == 4096
    _fake_sglang(monkeypatch, parallel=Unset(attn_cp_size=1, attn_dp_size=1))
    assert capture._sglang_parallel_settings() == {}


# -- lengths read before the forward stream moves on --------------------------------


def test_the_prompt_length_is_read_before_sglang_advances_it(new_capture, monkeypatch):
    """0.5.14 with --disable-overlap-schedule does orig_seq_lens.add_(1) after a pass,
    while the side-stream copy may not have run yet: emulate that copy with one that
    runs only when the dispatcher waits for it."""
    release = threading.Event()

    def deferred_copy(self, tensors, hosts=None):
        outs = hosts if hosts is not None else [torch.empty_like(t) for t in tensors]

        def ready():
            assert release.wait(10)
            for src, dst in zip(tensors, outs):
                dst.copy_(src)

        return ready if hosts is not None else (outs, ready)

    monkeypatch.setattr(capture._HostCopier, "copy", deferred_copy)
    cap = new_capture()
    batch = make_batch(["whole"], [12], [0], [12])
    cap.on_forward(*batch)
    batch[0].orig_seq_lens.add_(1)  # the scheduler moves on
    release.set()
    assert cap.flush(timeout=10)
    assert_dump(os.path.join(cap.dump_dir, "whole.pt"), *batch[1:], "whole")


# -- stops, restarts, crashes ----------------------------------------------------------

_SERVER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    import torch
    import batches
    capture = batches.capture
    real_save = torch.save

    def slow_save(obj, f):  # a writer that cannot keep up
        time.sleep(0.4)
        real_save(obj, f)

    cap = capture.HiddenStateCapture(sys.argv[2], writer_threads=1, max_pending=8,
                                     stop_timeout=30)
    class SlowTorch:
        save = staticmethod(slow_save)

        def __getattr__(self, name):
            return getattr(torch, name)

    cap._torch = SlowTorch()
    assert cap.install_stop_handler()
    for i in range(5):
        cap.on_forward(*batches.make_batch([f"s{i}"], [16], seed=i))
    cap.on_forward(*batches.make_batch(["cut"], [8], [0], [64]))  # never finishes
    print("answered", flush=True)
    time.sleep(60)
""")


def test_sigterm_writes_every_answered_batch_then_ends_the_process(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    dump = tmp_path / "dump"
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, here, str(dump)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "answered"
        assert len(dumped(dump)) < 5  # the writer is still busy: the stop must wait
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM  # ended by SIGTERM, as without us
    finally:
        proc.kill()
    assert dumped(dump) == [f"s{i}.pt" for i in range(5)]
    for i in range(5):
        b = make_batch([f"s{i}"], [16], seed=i)
        assert_dump(dump / f"s{i}.pt", *b[1:], f"s{i}")
    assert not [f for f in os.listdir(dump) if f.endswith(".tmp")]
    stats = json.loads((dump / capture.STATS_FILE).read_text())
    assert stats["dumped"] == 5 and stats["skipped"]["incomplete"] == 1
    assert "'cut': only 8 tokens were prefilled before SIGTERM" in \
        (dump / capture.ERROR_FILE).read_text()


def test_a_start_removes_dead_tmp_files_and_keeps_complete_ones(tmp_path, new_capture):
    dump = tmp_path / "dump"
    dump.mkdir()
    gone_pid = _a_dead_pid()
    (dump / f"a.pt.{gone_pid}.0badf00d.tmp").write_bytes(b"half")
    (dump / "b.pt.deadbeef.tmp").write_bytes(b"half, an earlier version's name")
    (dump / f".capture-probe.{gone_pid}.tmp").write_bytes(b"ok")
    alive = dump / f"c.pt.{os.getppid()}.12345678.tmp"  # a live writer's: not ours to touch
    alive.write_bytes(b"being written")
    complete = dump / "d.pt"
    torch.save({"input_ids": torch.arange(3)}, complete)
    before = os.stat(complete)
    cap = new_capture(dump_dir=dump)
    assert cap.removed_tmp == 3
    left = sorted(os.listdir(dump))
    assert [n for n in left if not n.startswith(".")] == sorted(
        [alive.name, "d.pt", capture.STATS_FILE])
    assert not [n for n in left if str(gone_pid) in n or "deadbeef" in n]
    assert os.stat(complete).st_ino == before.st_ino
    assert torch.equal(load(complete)["input_ids"], torch.arange(3))


def _a_dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# -- staging buffers sized at start, never grown on the forward path -----------------


def test_a_full_pass_fits_the_staging_buffer_made_at_start():
    """A pass of exactly the rows the buffer was made for, with the prompts' full lengths
    beside it (one prompt a row at most), is carved out of it without growing: growing is a
    pinned allocation on the forward path (0.75 s a buffer on an H200)."""
    rows, hidden, aux_layers = 512, 64, 3
    for prompts in (1, 7, rows):
        buffer = capture._StagingBuffer(torch, capture.staging_bytes_for(rows, hidden, aux_layers))
        made = buffer.nbytes
        tensors = [torch.zeros(rows, dtype=torch.int64), torch.zeros(rows, hidden, dtype=torch.bfloat16),
                   torch.zeros(rows, hidden * aux_layers, dtype=torch.bfloat16),
                   torch.zeros(prompts, dtype=torch.int64)]
        views = buffer.views(tensors)
        assert buffer.nbytes == made, f"{prompts} prompts: grew from {made} to {buffer.nbytes} bytes"
        assert [v.shape for v in views] == [t.shape for t in tensors]


# -- the device-to-host copy in pieces, off the forward thread (issue 21) ----------------


def test_the_copy_is_cut_into_pieces_that_cover_every_element_once():
    tensors = [torch.arange(10, dtype=torch.int64), torch.randn(7, 5).to(torch.bfloat16),
               torch.zeros(0, dtype=torch.int64), torch.randn(3, 33).to(torch.bfloat16)]
    for chunk in (1, 8, 16, 40, 1 << 20):
        hosts = [torch.full_like(t, -7) for t in tensors]
        pieces = list(capture._pieces(tensors, hosts, chunk))
        for src, dst in pieces:
            assert src.numel() >= 1 and src.numel() * src.element_size() <= max(chunk, src.element_size())
            dst.copy_(src)
        assert all(torch.equal(h, t) for h, t in zip(hosts, tensors)), chunk
        if chunk >= 1 << 20:
            assert len(pieces) == 3  # one a non-empty tensor


class _FakeCudaTensor:
    """A CPU tensor that says it is on a CUDA device, for the copier's CUDA path."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.device = type("Device", (), {"type": "cuda"})()

    def __getattr__(self, name):
        return getattr(self.tensor, name)


def _fake_cuda_torch(log):
    class Stream:
        def __init__(self, device=None, name="side"):
            self.name = name

        def wait_event(self, event):
            log.append(f"{self.name} waits for {event}")

        def synchronize(self):
            log.append(f"{self.name} synchronized")

        def record_event(self):
            log.append(f"{self.name} recorded")
            return "the pass's end"

    forward = Stream(name="forward")

    class Cuda:
        @staticmethod
        def Stream(device=None):
            return Stream(device)

        @staticmethod
        def current_stream(device=None):
            return forward

        @staticmethod
        def stream(_stream):
            return contextlib.nullcontext()

    return type("FakeTorch", (), {"cuda": Cuda})


def test_the_forward_thread_only_marks_the_pass_and_the_dispatcher_copies_piece_by_piece():
    """sglang's own small device-to-host copy (the pass's results, on the forward stream
    that the next pass follows) queued behind the whole 470 MB batch on the copy engine:
    14 % of the server on an H200. The forward thread now queues no copy; the dispatcher
    queues one piece at a time, each waited for, after the pass's end on the forward
    stream, and lets go of the device tensors once the last piece landed."""
    log = []
    source = torch.randn(64, 16).to(torch.bfloat16)
    ids = torch.arange(64, dtype=torch.int64)
    hosts = [torch.zeros_like(ids), torch.zeros_like(source)]
    copier = capture._HostCopier(_fake_cuda_torch(log), chunk_bytes=512)
    device_tensors = [_FakeCudaTensor(ids), _FakeCudaTensor(source)]
    ready = copier.copy(device_tensors, hosts)
    assert log == ["forward recorded"]
    assert not hosts[0].any() and not hosts[1].any(), "copied on the forward thread"
    probe = weakref.ref(device_tensors[1])
    del device_tensors
    assert probe() is not None, "the device tensors were let go before the copy"
    ready()
    pieces = 1 + (64 * 16 * 2) // 512  # the ids fit one piece; the bf16 rows take four
    assert log == ["forward recorded", "side waits for the pass's end"] + ["side synchronized"] * pieces
    assert torch.equal(hosts[0], ids) and torch.equal(hosts[1], source)
    assert probe() is None, "the device tensors are still held after the copy landed"
