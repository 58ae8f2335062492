"""sglang's own functions and methods, compiled out of the real source.

The tests run the code paths that call the capture (the patched
``DeepseekV2ForCausalLM.forward``, Kimi-K2.5's wrapper, ``general_mm_embed_routine``)
as sglang ships them: each function is compiled from its module's source with only
the globals it touches on the path under test supplied as stand-ins.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import types

import torch

# what the compiled code reads from its module's globals on the text-only path
BASE_SCOPE = {
    "torch": torch,
    # DeepseekV2ForCausalLM.forward enters get_attn_tp_context().maybe_input_scattered(fb)
    "get_attn_tp_context": lambda: types.SimpleNamespace(
        maybe_input_scattered=lambda fb: contextlib.nullcontext()),
}


def _compile(node, scope):
    module = ast.Module(body=[node], type_ignores=[])
    code = compile(module, "sglang", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, scope)  # noqa: S102 - sglang's own source, from its wheel
    return scope[node.name]


def compile_functions(source, names, scope):
    """Top-level functions of a module, into ``scope`` (they may call each other);
    names this version does not have are skipped."""
    scope.update({k: v for k, v in BASE_SCOPE.items() if k not in scope})
    tree = ast.parse(source)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            found[node.name] = _compile(node, scope)
    assert found, f"none of {sorted(names)} in this source"
    return found


def compile_methods(source, class_name, names, scope=None):
    """Methods of one class, as plain functions taking ``self``."""
    scope = dict(BASE_SCOPE, **(scope or {}))
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    found = {node.name: _compile(node, scope) for node in cls.body
             if isinstance(node, ast.FunctionDef) and node.name in names}
    assert set(found) == set(names), f"not in this sglang: {set(names) - set(found)}"
    return found


class _CallableModel:
    def __init__(self, fn):
        self._fn = fn
        self.layers_to_capture = []

    def __call__(self, *args):
        return self._fn(*args)


class PatchedDeepseek:
    """`self` for the real DeepseekV2ForCausalLM methods: the inner model returns
    (hidden, aux) as DeepseekV2Model.forward does with capture on; the logits
    processor records what it was given."""

    def __init__(self, methods, outputs, num_hidden_layers=61):
        self._methods = methods
        self.config = types.SimpleNamespace(num_hidden_layers=num_hidden_layers, hidden_size=0)
        self.pp_group = types.SimpleNamespace(is_last_rank=True, is_first_rank=True)
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

    def forward(self, *args, **kwargs):
        return self._methods["forward"](self, *args, **kwargs)

    __call__ = forward  # nn.Module: calling the model runs forward()

    def _model(self, *args):
        self.model_calls.append(args)
        return self._outputs if self.capture_aux_hidden_states else self._outputs[0]

    def logits_processor(self, input_ids, hidden, lm_head, forward_batch, aux):
        self.logits_calls.append((hidden, aux))
        return "logits"
