"""Which layers a user gets for the SGLANG_HS_LAYER_IDS they set, in 0.5.14 and 0.5.23.

sglang's own ``set_eagle3_layers_to_capture`` (compiled from each real
deepseek_v2.py, patched as the role patches it) decides which layers' inputs the
model hands back; the capture passes it the ids as given. A list that starts
with 1 is shifted by one, any other list is used as given: SpecForge's default
ids 1,29,57 and a drafter's ``eagle_aux_hidden_state_layer_ids`` 2,30,58 both
capture [2, 30, 58] on a 61-layer model, while 1,30,58 captures [2, 31, 59].
The ``captured_layers`` a file records must be the layers sglang captured.
"""

from __future__ import annotations

import os

import pytest

from batches import capture, load, make_batch
from sglang_methods import PatchedDeepseek as Model
from sglang_methods import compile_methods


@pytest.mark.parametrize("raw_ids,layer_ids,captured", [
    (None, [1, 29, 57], [2, 30, 58]),  # unset: SpecForge's default ids for 61 layers
    ("1,29,57", [1, 29, 57], [2, 30, 58]),
    ("2,30,58", [2, 30, 58], [2, 30, 58]),  # the published Kimi-K2.5 drafters' ids
    ("1,30,58", [1, 30, 58], [2, 31, 59]),  # starts with 1: every id is shifted
])
def test_the_files_record_the_layers_sglang_captures(patched_source, tmp_path, raw_ids,
                                                     layer_ids, captured):
    methods = compile_methods(patched_source, "DeepseekV2ForCausalLM",
                              {"forward", "set_eagle3_layers_to_capture"})
    batch, ids, hidden, aux = make_batch(["r0"], [5])
    model = Model(methods, (hidden, aux), num_hidden_layers=61)
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    if raw_ids is not None:
        env[capture.ENV_LAYER_IDS] = raw_ids
    # what the patched __init__ does
    hook = model._eagle3_hs_capture = capture.install(model, tp_rank=0, environ=env,
                                                      parallel={})
    try:
        assert model.model.layers_to_capture == captured  # what sglang's forward reads
        model.forward(ids, batch.positions, batch)
        assert hook.flush(timeout=10)
        data = load(os.path.join(tmp_path, "dump", "r0.pt"))
        assert data["layer_ids"] == layer_ids
        assert data["captured_layers"] == captured
    finally:
        hook.close()
