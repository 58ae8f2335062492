"""Helpers for the capture module's tests (CPU torch, .venv-torch).

Batches carry sglang 0.5.23's ForwardBatch field names (model_executor/
forward_batch_info.py): forward_mode, batch_size, rids, input_ids,
extend_seq_lens(_cpu), extend_prefix_lens(_cpu), orig_seq_lens, positions.
"""

from __future__ import annotations

import enum
import os
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "roles", "sglang_patch", "files"))
sys.path.insert(0, os.path.join(REPO, "tests", "patch"))

import eagle3_hs_capture as capture  # noqa: E402


class ForwardMode(enum.IntEnum):
    """Mirrors sglang 0.5.23's ForwardMode: same names, same order."""

    EXTEND = enum.auto()
    DECODE = enum.auto()
    MIXED = enum.auto()
    IDLE = enum.auto()
    TARGET_VERIFY = enum.auto()
    DRAFT_EXTEND_V2 = enum.auto()
    PREBUILT = enum.auto()
    SPLIT_PREFILL = enum.auto()
    DLLM_EXTEND = enum.auto()

    # the predicates sglang's own code (mm_utils, the wrappers) asks
    def is_decode(self):
        return self == ForwardMode.DECODE

    def is_target_verify(self):
        return self == ForwardMode.TARGET_VERIFY

    def is_extend(self):
        return self in (ForwardMode.EXTEND, ForwardMode.MIXED, ForwardMode.TARGET_VERIFY,
                        ForwardMode.SPLIT_PREFILL, ForwardMode.DLLM_EXTEND)


HIDDEN = 16
NUM_AUX = 3


def make_batch(rids, seq_lens, prefix_lens=None, full_lens=None, mode=ForwardMode.EXTEND,
               seed=0):
    """A ForwardBatch stand-in plus the tensors the model hands the hook.

    Returns (forward_batch, input_ids, hidden_states, aux_hidden_states), with
    random bf16 hidden states, so every request's slice is distinct.
    """
    prefix_lens = list(prefix_lens or [0] * len(rids))
    full_lens = list(full_lens or [p + n for p, n in zip(prefix_lens, seq_lens)])
    gen = torch.Generator().manual_seed(seed)
    total = sum(seq_lens)
    input_ids = torch.randint(0, 150000, (total,), generator=gen, dtype=torch.int64)
    hidden = torch.randn(total, HIDDEN, generator=gen).to(torch.bfloat16)
    aux = torch.randn(total, NUM_AUX * HIDDEN, generator=gen).to(torch.bfloat16)
    positions = torch.cat(
        [torch.arange(p, p + n) for p, n in zip(prefix_lens, seq_lens)]
    ) if total else torch.empty(0, dtype=torch.int64)
    batch = types.SimpleNamespace(
        forward_mode=mode,
        batch_size=len(rids),
        rids=list(rids),
        input_ids=input_ids,
        positions=positions,
        seq_lens=torch.tensor([p + n for p, n in zip(prefix_lens, seq_lens)]),
        extend_num_tokens=total,
        extend_seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        extend_prefix_lens=torch.tensor(prefix_lens, dtype=torch.int32),
        extend_seq_lens_cpu=list(seq_lens),
        extend_prefix_lens_cpu=list(prefix_lens),
        orig_seq_lens=torch.tensor(full_lens, dtype=torch.int32),
        input_embeds=None,
        mm_inputs=None,
        contains_mm_inputs=lambda: False,
    )
    return batch, input_ids, hidden, aux


def slices(tensors, seq_lens):
    """Split (input_ids, hidden, aux) of a batch per request."""
    out, start = [], 0
    for n in seq_lens:
        out.append(tuple(t[start:start + n] for t in tensors))
        start += n
    return out


def load(path):
    return torch.load(path, weights_only=True)


def assert_dump(path, ids, hidden, aux, rid):
    """The file equals the input tensors exactly, in SpecForge's layout."""
    data = load(path)
    assert data["rid"] == rid
    assert torch.equal(data["input_ids"], ids)
    assert data["hidden_state"].shape == (1, ids.shape[0], HIDDEN)
    assert data["aux_hidden_state"].shape == (1, ids.shape[0], NUM_AUX * HIDDEN)
    assert data["hidden_state"].dtype == torch.bfloat16
    assert data["aux_hidden_state"].dtype == torch.bfloat16
    assert torch.equal(data["hidden_state"][0], hidden)
    assert torch.equal(data["aux_hidden_state"][0], aux)
    return data


def dumped(dump_dir):
    return sorted(f for f in os.listdir(dump_dir) if f.endswith(capture.FILE_SUFFIX))


class FakeDeepseekModel:
    """DeepseekV2ForCausalLM's surface that install() uses, with sglang 0.5.23's
    set_eagle3_layers_to_capture (deepseek_v2.py 3458-3473) copied verbatim."""

    def __init__(self, num_hidden_layers=61, is_last_pp_rank=True):
        self.config = types.SimpleNamespace(num_hidden_layers=num_hidden_layers)
        self.model = types.SimpleNamespace(layers_to_capture=[])
        self.pp_group = types.SimpleNamespace(is_last_rank=is_last_pp_rank)
        self.capture_aux_hidden_states = False

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if not self.pp_group.is_last_rank:
            return

        if layer_ids is None:
            self.capture_aux_hidden_states = True
            num_layers = self.config.num_hidden_layers
            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
        else:
            self.capture_aux_hidden_states = True
            if layer_ids and layer_ids[0] == 1:
                self.model.layers_to_capture = [val + 1 for val in layer_ids]
            else:
                self.model.layers_to_capture = list(layer_ids)
