"""The capture driven by sglang's own code, patched as the role patches it.

DeepseekV2ForCausalLM.forward and set_eagle3_layers_to_capture are compiled from
the real deepseek_v2.py (downloaded once, tests/patch/sglang_source.py) after the
role's insertions; only what they call on `self` and two module globals are
stand-ins. This proves the hook sits where the names it uses exist.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import os
import types

import pytest
import torch

import sglang_source
from batches import assert_dump, capture, make_batch, slices

VERSIONS = ["0.5.14", "0.5.23"]


def _real_methods(source, names):
    """Compile methods of DeepseekV2ForCausalLM out of the module source."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body
               if isinstance(n, ast.ClassDef) and n.name == "DeepseekV2ForCausalLM")
    found = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            module = ast.Module(body=[node], type_ignores=[])
            code = compile(module, "deepseek_v2.py", "exec",
                           flags=__future__.annotations.compiler_flag, dont_inherit=True)
            scope = {
                "torch": torch,
                # forward() enters get_attn_tp_context().maybe_input_scattered(fb)
                "get_attn_tp_context": lambda: types.SimpleNamespace(
                    maybe_input_scattered=lambda fb: contextlib.nullcontext()),
            }
            exec(code, scope)
            found[node.name] = scope[node.name]
    assert set(found) == set(names), f"not in this sglang: {set(names) - set(found)}"
    return found


@pytest.fixture(scope="module", params=VERSIONS)
def patched_source(request):
    path = sglang_source.extract(request.param, "sglang/srt/models/deepseek_v2.py")
    with open(path, encoding="utf-8") as f:
        pristine = f.read()
    spec = sglang_source.spec(request.param)
    assert sglang_source.sha256(pristine) == spec["pristine_sha256"]
    return sglang_source.apply(pristine, spec)


class Model:
    """`self` for the real methods: the model returns (hidden, aux) as
    DeepseekV2Model.forward does with capture on; the logits processor records."""

    def __init__(self, methods, outputs):
        self._methods = methods
        self.config = types.SimpleNamespace(num_hidden_layers=61)
        self.pp_group = types.SimpleNamespace(is_last_rank=True)
        self.capture_aux_hidden_states = False
        self.lm_head = object()
        self._outputs = outputs
        self.model = _CallableModel(self._model)  # DeepseekV2Model: self.model(...)
        self.model_calls = []
        self.logits_calls = []
        # 0.5.14's forward looks at its prefill context-parallel switches first
        self.dsa_enable_prefill_cp = False
        self.mla_enable_prefill_cp = False

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        return self._methods["set_eagle3_layers_to_capture"](self, layer_ids)

    def forward(self, *args):
        return self._methods["forward"](self, *args)

    def _model(self, *args):
        self.model_calls.append(args)
        return self._outputs if self.capture_aux_hidden_states else self._outputs[0]

    def logits_processor(self, input_ids, hidden, lm_head, forward_batch, aux):
        self.logits_calls.append((hidden, aux))
        return "logits"


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


class _CallableModel:
    def __init__(self, fn):
        self._fn = fn
        self.layers_to_capture = []

    def __call__(self, *args):
        return self._fn(*args)
