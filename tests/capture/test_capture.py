"""The capture module on CPU torch: what lands in the dump dir, and when nothing must."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

from batches import (
    FakeDeepseekModel,
    ForwardMode,
    assert_dump,
    capture,
    dumped,
    make_batch,
    slices,
)


def test_one_request_is_one_file_equal_to_the_input(new_capture):
    cap = new_capture()
    batch, ids, hidden, aux = make_batch(["sample-0"], [37])
    cap.on_forward(batch, ids, hidden, aux)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["sample-0.pt"]
    data = assert_dump(os.path.join(cap.dump_dir, "sample-0.pt"), ids, hidden, aux, "sample-0")
    assert data["layer_ids"] == [1, 29, 57]
    assert data["captured_layers"] == [2, 30, 58]
    assert not [f for f in os.listdir(cap.dump_dir) if f.endswith(".tmp")]


def test_three_requests_in_one_batch_are_split_by_extend_seq_lens(new_capture):
    cap = new_capture()
    rids, lens = ["a", "b", "c"], [5, 1, 12]
    batch, ids, hidden, aux = make_batch(rids, lens, seed=3)
    cap.on_forward(batch, ids, hidden, aux)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["a.pt", "b.pt", "c.pt"]
    for rid, (i, h, a) in zip(rids, slices((ids, hidden, aux), lens)):
        assert_dump(os.path.join(cap.dump_dir, f"{rid}.pt"), i, h, a, rid)


def test_a_prompt_chunked_over_three_passes_is_stitched(new_capture):
    """Chunked prefill: 'long' (30 tokens) runs as 12 + 12 + 6 tokens; other prompts
    share its passes (one before it finishes, one after it started)."""
    cap = new_capture()
    path = os.path.join(cap.dump_dir, "long.pt")
    # pass 1: a short prompt completes, then the first chunk of 'long'
    b1 = make_batch(["short-1", "long"], [4, 12], [0, 0], [4, 30], seed=1)
    # pass 2: the middle chunk of 'long' alone
    b2 = make_batch(["long"], [12], [12], [30], seed=2)
    # pass 3: the last chunk of 'long', then another prompt
    b3 = make_batch(["long", "short-2"], [6, 3], [24, 0], [30, 3], seed=3)

    cap.on_forward(*b1)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["short-1.pt"]  # not 'long' yet
    cap.on_forward(*b2)
    assert cap.flush(timeout=10)
    assert not os.path.exists(path)
    cap.on_forward(*b3)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["long.pt", "short-1.pt", "short-2.pt"]

    parts = [slices(b1[1:], [4, 12])[1], b2[1:], slices(b3[1:], [6, 3])[0]]
    want = [torch.cat([p[i] for p in parts]) for i in range(3)]
    assert want[0].shape == (30,)
    assert_dump(path, *want, "long")
    short2 = slices(b3[1:], [6, 3])[1]
    assert_dump(os.path.join(cap.dump_dir, "short-2.pt"), *short2, "short-2")


def test_health_check_and_warmup_are_never_dumped(new_capture):
    cap = new_capture()
    warmup_rid = "9f1c2b3a4d5e6f708192a3b4c5d6e7f8"  # sglang's uuid4().hex for rid-less requests
    rids = ["HEALTH_CHECK_5b0b2ad9c0a94d30a3e2b6a1c8a9d1f2", warmup_rid, "row-7"]
    batch, ids, hidden, aux = make_batch(rids, [1, 6, 9])
    cap.on_forward(batch, ids, hidden, aux)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == ["row-7.pt"]
    assert_dump(os.path.join(cap.dump_dir, "row-7.pt"),
                *slices((ids, hidden, aux), [1, 6, 9])[2], "row-7")

    # a batch of only those costs nothing: no copy, no queued batch
    only = make_batch(rids[:2], [1, 6])
    before = cap.stats["batches"]
    cap.on_forward(*only)
    assert cap.stats["batches"] == before


@pytest.mark.parametrize("mode", [m for m in ForwardMode if m is not ForwardMode.EXTEND],
                         ids=lambda m: m.name)
def test_other_forward_modes_are_ignored_without_touching_the_batch(new_capture, mode):
    """DECODE, MIXED, TARGET_VERIFY (and the rest of is_extend()'s modes) do no work:
    the hook returns after reading forward_mode, so a batch whose every other
    field raises on access goes through."""
    cap = new_capture()

    class OnlyMode:
        forward_mode = mode

        def __getattr__(self, name):
            raise AssertionError(f"{mode.name} pass read forward_batch.{name}")

    cap.on_forward(OnlyMode(), None, None, None)
    # and with a real batch of that mode nothing is written
    batch, ids, hidden, aux = make_batch(["r1", "r2"], [3, 4], mode=mode)
    cap.on_forward(batch, ids, hidden, aux)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == []
    assert cap.stats["batches"] == 0


def test_install_does_nothing_without_the_env_variable(tmp_path):
    model = FakeDeepseekModel()
    assert capture.install(model, tp_rank=0, environ={}) is None
    assert model.capture_aux_hidden_states is False
    assert model.model.layers_to_capture == []


def test_rank_1_writes_nothing(tmp_path):
    model = FakeDeepseekModel()
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    assert capture.install(model, tp_rank=1, environ=env) is None
    assert model.capture_aux_hidden_states is False
    assert not (tmp_path / "dump").exists()


def test_not_the_last_pipeline_stage_writes_nothing(tmp_path):
    model = FakeDeepseekModel(is_last_pp_rank=False)
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    assert capture.install(model, tp_rank=0, environ=env) is None
    assert not (tmp_path / "dump").exists()


def test_install_uses_sglang_layer_ids_with_its_plus_one_quirk(tmp_path):
    model = FakeDeepseekModel()
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    cap = capture.install(model, tp_rank=0, environ=env)
    try:
        assert model.capture_aux_hidden_states is True
        assert model.model.layers_to_capture == [2, 30, 58]
        assert cap.metadata["layer_ids"] == [1, 29, 57]
        assert cap.metadata["captured_layers"] == [2, 30, 58]
        assert cap.metadata["model"] == "FakeDeepseekModel"
        batch, ids, hidden, aux = make_batch(["x"], [8])
        cap.on_forward(batch, ids, hidden, aux)
        assert cap.flush(timeout=10)
        data = assert_dump(os.path.join(cap.dump_dir, "x.pt"), ids, hidden, aux, "x")
        assert data["format_version"] == capture.FORMAT_VERSION
        assert "sglang_version" in data
    finally:
        cap.close()


def test_a_model_built_twice_shares_one_capture(tmp_path):
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    first = capture.install(FakeDeepseekModel(), tp_rank=0, environ=env)
    try:
        second = capture.install(FakeDeepseekModel(), tp_rank=0, environ=env)
        assert second is first
    finally:
        first.close()
    third = capture.install(FakeDeepseekModel(), tp_rank=0, environ=env)
    try:
        assert third is not first  # a closed one is not handed out again
    finally:
        third.close()


def test_layer_ids_not_starting_at_1_are_taken_as_given_and_said_so(tmp_path, caplog):
    model = FakeDeepseekModel()
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump"), capture.ENV_LAYER_IDS: "2,30,58"}
    with caplog.at_level(logging.WARNING):
        cap = capture.install(model, tp_rank=0, environ=env)
    try:
        assert model.model.layers_to_capture == [2, 30, 58]
        assert "no +1" in caplog.text
    finally:
        cap.close()


@pytest.mark.parametrize("raw, needle", [
    ("1,29,x", "SGLANG_HS_LAYER_IDS='1,29,x'"),
    ("1,29,61", "layers 0..60"),
])
def test_bad_layer_ids_fail_at_start_naming_the_variable(tmp_path, raw, needle):
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump"), capture.ENV_LAYER_IDS: raw}
    with pytest.raises(capture.HiddenStateCaptureError) as err:
        capture.install(FakeDeepseekModel(), tp_rank=0, environ=env)
    assert needle in str(err.value)


def test_unwritable_dir_fails_at_start_loudly(readonly_tmpfs, caplog):
    target = readonly_tmpfs / "dump"
    env = {capture.ENV_DUMP_DIR: str(target)}
    with caplog.at_level(logging.ERROR):
        with pytest.raises(capture.HiddenStateCaptureError) as err:
            capture.install(FakeDeepseekModel(), tp_rank=0, environ=env)
    assert f"SGLANG_HS_DUMP_DIR={target} is not writable" in str(err.value)
    assert "Read-only file system" in str(err.value)
    assert "is not writable" in caplog.text


class GatedTorch:
    """torch, except that save() waits for a gate: a writer that cannot keep up."""

    def __init__(self):
        self.gate = threading.Event()
        self.saving = threading.Event()

    def __getattr__(self, name):
        return getattr(torch, name)

    def save(self, obj, f):
        self.saving.set()
        assert self.gate.wait(10), "test gate never opened"
        torch.save(obj, f)


def test_a_full_queue_blocks_the_forward_and_loses_nothing(new_capture):
    cap = new_capture(writer_threads=1, max_pending=1)
    gated = cap._torch = GatedTorch()
    batches = [make_batch([f"q{i}"], [5 + i], seed=i) for i in range(4)]

    cap.on_forward(*batches[0])  # takes the only slot; its write hangs on the gate
    assert gated.saving.wait(10)
    # while it writes, the file exists only under a *.tmp name
    assert dumped(cap.dump_dir) == []
    assert [f for f in os.listdir(cap.dump_dir) if f.endswith(".tmp")]

    done = threading.Event()

    def forward_thread():
        for b in batches[1:]:
            cap.on_forward(*b)
        done.set()

    t = threading.Thread(target=forward_thread, daemon=True)
    t.start()
    time.sleep(0.3)
    assert not done.is_set(), "the forward went on although the queue was full"
    assert cap.stats["batches"] == 1
    gated.gate.set()
    assert done.wait(10)
    assert cap.flush(timeout=10)
    assert cap.stats["stall_s"] > 0.2
    assert dumped(cap.dump_dir) == [f"q{i}.pt" for i in range(4)]
    for i, b in enumerate(batches):
        assert_dump(os.path.join(cap.dump_dir, f"q{i}.pt"), *b[1:], f"q{i}")


def test_many_batches_through_a_small_queue_all_arrive(new_capture):
    cap = new_capture(writer_threads=3, max_pending=2)
    want = {}
    for i in range(40):
        rids = [f"m{i}-{j}" for j in range(3)]
        lens = [1 + (i + j) % 7 for j in range(3)]
        b = make_batch(rids, lens, seed=i)
        cap.on_forward(*b)
        for rid, part in zip(rids, slices(b[1:], lens)):
            want[rid] = part
    assert cap.flush(timeout=30)
    assert len(dumped(cap.dump_dir)) == 120
    for rid, part in want.items():
        assert_dump(os.path.join(cap.dump_dir, f"{rid}.pt"), *part, rid)


def test_aux_as_a_list_of_layers_is_concatenated(new_capture):
    """Models not yet on AuxHiddenStatePacker hand over a list of K [T, H] tensors."""
    cap = new_capture()
    batch, ids, hidden, aux = make_batch(["l"], [6])
    layers = list(aux.split(aux.shape[1] // 3, dim=1))
    cap.on_forward(batch, ids, hidden, layers)
    assert cap.flush(timeout=10)
    assert_dump(os.path.join(cap.dump_dir, "l.pt"), ids, hidden, aux, "l")


def test_a_rid_becomes_a_safe_file_name(new_capture):
    cap = new_capture()
    batch, ids, hidden, aux = make_batch(["../etc/passwd", ".hidden"], [2, 3])
    cap.on_forward(batch, ids, hidden, aux)
    assert cap.flush(timeout=10)
    names = dumped(cap.dump_dir)
    # no path separator, no leading dot; the file keeps the rid itself
    assert names == ["%2E.%2Fetc%2Fpasswd.pt", "%2Ehidden.pt"]
    for name, rid, part in zip(names, ["../etc/passwd", ".hidden"], slices((ids, hidden, aux), [2, 3])):
        assert_dump(os.path.join(cap.dump_dir, name), *part, rid)


def test_tokens_never_computed_are_reported_not_dumped(new_capture):
    """A prefix-cache hit starts a prompt past token 0: the file would lack them."""
    cap = new_capture()
    batch, ids, hidden, aux = make_batch(["cached"], [5], [20], [25])
    cap.on_forward(batch, ids, hidden, aux)
    assert cap.flush(timeout=10)
    assert dumped(cap.dump_dir) == []
    report = open(os.path.join(cap.dump_dir, capture.ERROR_FILE)).read()
    assert "'cached'" in report and "starts at token 20" in report


def test_a_prompt_whose_last_chunk_never_came_is_reported_at_close(new_capture):
    cap = new_capture()
    cap.on_forward(*make_batch(["cut"], [8], [0], [100]))
    assert cap.flush(timeout=10)
    cap.close()
    report = open(os.path.join(cap.dump_dir, capture.ERROR_FILE)).read()
    assert "'cut': only 8 tokens" in report


def test_a_clean_run_leaves_only_the_dumps(new_capture):
    cap = new_capture()
    cap.on_forward(*make_batch(["only"], [3]))
    cap.close()
    assert sorted(os.listdir(cap.dump_dir)) == [capture.STATS_FILE, "only.pt"]


def test_importing_the_module_imports_neither_torch_nor_sglang():
    """It is imported by deepseek_v2.py in every server, capture on or off."""
    files = os.path.join(os.path.dirname(capture.__file__))
    code = ("import sys, eagle3_hs_capture; "
            "print(sorted(m for m in ('torch', 'sglang') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=files, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "[]"
