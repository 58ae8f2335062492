"""One writer per server: TP rank 0 of the last pipeline stage, asked of sglang as the server asks.

The role's patch calls ``install(self)`` in ``DeepseekV2ForCausalLM.__init__`` with no rank:
the capture asks sglang's ``parallel_state`` for this process's tensor-parallel rank. Here
every rank function of the real ``parallel_state`` (read from each supported sglang's source)
answers, and the TP rank differs from all the others (pipeline, world, attention, MoE...):
a capture that asks for any other rank would write on every TP rank, or on none.
"""

from __future__ import annotations

import ast
import signal
import sys
import types

import pytest

import sglang_source
from batches import FakeDeepseekModel, assert_dump, capture, dumped, make_batch, slices

TP_RANK = "get_tensor_model_parallel_rank"
TP_GROUPS = ("get_tp_group", "get_tensor_model_parallel_group")


def _parallel_state_names(version):
    """The ``get_*`` functions (and aliases of them) of this sglang's parallel_state."""
    path = sglang_source.extract(version, "sglang/srt/distributed/parallel_state.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    return sorted(n for n in names if n.startswith("get_") and n.endswith(("_rank", "_group")))


def _fake_sglang(monkeypatch, version, tp_rank, other_rank):
    """sglang.srt.distributed.parallel_state whose TP rank is ``tp_rank`` and every other
    rank ``other_rank``; ``from sglang.srt import eagle3_hs_capture`` gives the module."""
    names = _parallel_state_names(version)
    assert TP_RANK in names  # what the capture imports exists in this sglang
    state = types.ModuleType("sglang.srt.distributed.parallel_state")
    for name in names:
        rank = tp_rank if name == TP_RANK or name in TP_GROUPS else other_rank
        if name.endswith("_rank"):
            setattr(state, name, lambda rank=rank: rank)
        else:
            group = types.SimpleNamespace(rank_in_group=rank, rank=rank, world_size=2)
            setattr(state, name, lambda group=group: group)
    srt = types.ModuleType("sglang.srt")
    srt.eagle3_hs_capture = capture
    mods = {"sglang": types.ModuleType("sglang"), "sglang.srt": srt,
            "sglang.srt.distributed": types.ModuleType("sglang.srt.distributed"),
            "sglang.srt.distributed.parallel_state": state,
            "sglang.srt.eagle3_hs_capture": capture}
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _patched_init_tail(version, model):
    """What the role inserts at the end of DeepseekV2ForCausalLM.__init__, run on ``model``."""
    (text,) = [i["text"] for i in sglang_source.spec(version)["insertions"]
               if "install(self)" in i["text"]]
    exec(compile(text, f"deepseek_v2.py ({version}, patched)", "exec"),  # noqa: S102
         {"self": model})
    return model._eagle3_hs_capture


@pytest.fixture
def sigterm_kept():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("version", sglang_source.supported_versions())
def test_a_tp_rank_other_than_0_writes_nothing_whatever_its_other_ranks(
        tmp_path, monkeypatch, sigterm_kept, version):
    # TP rank 1 of a single-stage server: its pipeline rank (and every other) is 0
    _fake_sglang(monkeypatch, version, tp_rank=1, other_rank=0)
    monkeypatch.setenv(capture.ENV_DUMP_DIR, str(tmp_path / "dump"))
    model = FakeDeepseekModel()
    cap = _patched_init_tail(version, model)
    if cap is not None:
        cap.close()
    assert cap is None
    assert model.capture_aux_hidden_states is False
    assert not (tmp_path / "dump").exists()


@pytest.mark.parametrize("version", sglang_source.supported_versions())
def test_tp_rank_0_of_the_last_stage_writes_whatever_its_other_ranks(
        tmp_path, monkeypatch, sigterm_kept, version):
    # TP rank 0 of the last of two pipeline stages: its pipeline rank (and every other) is 1
    _fake_sglang(monkeypatch, version, tp_rank=0, other_rank=1)
    monkeypatch.setenv(capture.ENV_DUMP_DIR, str(tmp_path / "dump"))
    model = FakeDeepseekModel(is_last_pp_rank=True)
    cap = _patched_init_tail(version, model)
    assert cap is not None
    try:
        batch, ids, hidden, aux = make_batch(["r0"], [6])
        cap.on_forward(batch, ids, hidden, aux)
        assert cap.flush(timeout=10)
        assert dumped(cap.dump_dir) == ["r0.pt"]
        assert_dump(str(tmp_path / "dump" / "r0.pt"), *slices((ids, hidden, aux), [6])[0], "r0")
    finally:
        cap.close()
