"""The capture driven by sglang's own code, patched as the role patches it.

DeepseekV2ForCausalLM.forward and set_eagle3_layers_to_capture are compiled from
the real deepseek_v2.py (downloaded once, tests/patch/sglang_source.py) after the
role's insertions; only what they call on `self` and two module globals are
stand-ins. This proves the hook sits where the names it uses exist.
"""

from __future__ import annotations

import os

from batches import assert_dump, capture, make_batch, slices
from sglang_methods import PatchedDeepseek as Model
from sglang_methods import compile_methods


def _real_methods(source, names):
    return compile_methods(source, "DeepseekV2ForCausalLM", names)


def test_patched_forward_dumps_what_the_model_returned(patched_source, tmp_path):
    methods = _real_methods(patched_source, {"forward", "set_eagle3_layers_to_capture"})
    batch, ids, hidden, aux = make_batch(["p0", "p1"], [7, 4])
    model = Model(methods, (hidden, aux))

    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    # what the patched __init__ does
    model._eagle3_hs_capture = capture.install(model, tp_rank=0, environ=env)
    try:
        assert model.model.layers_to_capture == [2, 30, 58]  # sglang's own +1
        assert model.forward(ids, batch.positions, batch) == "logits"
        # the logits processor still gets what it got before the patch
        (seen_hidden, seen_aux), = model.logits_calls
        assert seen_hidden is hidden and seen_aux is aux
        assert model._eagle3_hs_capture.flush(timeout=10)
        for rid, part in zip(["p0", "p1"], slices((ids, hidden, aux), [7, 4])):
            assert_dump(os.path.join(tmp_path, "dump", f"{rid}.pt"), *part, rid)
    finally:
        model._eagle3_hs_capture.close()


def test_patched_forward_without_capture_is_unchanged(patched_source):
    """SGLANG_HS_DUMP_DIR unset: install() gave None and forward() is sglang's."""
    methods = _real_methods(patched_source, {"forward"})
    batch, ids, hidden, aux = make_batch(["p0"], [3])
    model = Model(methods, (hidden, aux))
    model._eagle3_hs_capture = capture.install(model, tp_rank=0, environ={})
    assert model._eagle3_hs_capture is None
    assert model.forward(ids, batch.positions, batch) == "logits"
    (seen_hidden, seen_aux), = model.logits_calls
    assert seen_hidden is hidden and seen_aux is None
