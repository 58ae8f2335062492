"""Kimi-K2.5: the capture under sglang's own vision wrapper.

``KimiK25ForConditionalGeneration.forward`` (models/kimi_k25.py) and the
``general_mm_embed_routine`` it calls (managers/mm_utils.py, with 0.5.23's
``prepare_mm_inputs``) are compiled from the real source; the language model is the
patched ``DeepseekV2ForCausalLM.forward``, also from the real source. The wrapper
calls it with ``input_ids=None`` and the embeddings, text-only requests included:
the dump must still carry the batch's token ids.
"""

from __future__ import annotations

import os
import types

import pytest
import torch

import sglang_source
from batches import assert_dump, capture, make_batch, slices
from sglang_methods import PatchedDeepseek, compile_functions, compile_methods

VERSIONS = ["0.5.14", "0.5.23"]


def _read(version, member):
    with open(sglang_source.extract(version, member), encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module", params=VERSIONS)
def kimi_forward(request):
    """(the wrapper's forward, the patched language-model methods) of one version."""
    version = request.param
    pristine = _read(version, "sglang/srt/models/deepseek_v2.py")
    patched = sglang_source.apply(pristine, sglang_source.spec(version))
    deepseek = compile_methods(patched, "DeepseekV2ForCausalLM",
                               {"forward", "set_eagle3_layers_to_capture"})
    scope = {"Modality": types.SimpleNamespace(IMAGE="image")}
    compile_functions(_read(version, "sglang/srt/managers/mm_utils.py"),
                      {"general_mm_embed_routine", "prepare_mm_inputs"}, scope)
    wrapper = compile_methods(_read(version, "sglang/srt/models/kimi_k25.py"),
                              "KimiK25ForConditionalGeneration", {"forward"}, scope)
    return wrapper["forward"], deepseek


class Embedding:
    """embed_tokens: ids -> [T, H] rows (what the wrapper hands over as input_embeds)."""

    def __call__(self, ids):
        return torch.zeros(ids.shape[0], 4)


def test_kimi_k25_text_request_is_dumped_with_the_batch_ids(kimi_forward, tmp_path):
    forward, deepseek = kimi_forward
    batch, ids, hidden, aux = make_batch(["kimi-0", "kimi-1"], [6, 9], seed=5)
    language_model = PatchedDeepseek(deepseek, (hidden, aux))
    language_model.get_input_embeddings = Embedding
    language_model.pp_group.is_first_rank = True
    env = {capture.ENV_DUMP_DIR: str(tmp_path / "dump")}
    language_model._eagle3_hs_capture = capture.install(language_model, tp_rank=0, environ=env)
    wrapper = types.SimpleNamespace(language_model=language_model, get_image_feature=None)
    try:
        assert forward(wrapper, batch.input_ids, batch.positions, batch) == "logits"
        # the wrapper really called the language model without ids
        (call,) = language_model.model_calls
        assert call[0] is None and call[3] is not None
        assert language_model._eagle3_hs_capture.flush(timeout=10)
        for rid, part in zip(["kimi-0", "kimi-1"], slices((ids, hidden, aux), [6, 9])):
            assert_dump(os.path.join(tmp_path, "dump", f"{rid}.pt"), *part, rid)
        assert language_model._eagle3_hs_capture.failure is None
    finally:
        language_model._eagle3_hs_capture.close()
