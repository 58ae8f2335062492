"""A prompt whose last chunk is one token long is dumped whole, once, when that token came.

sglang's chunked prefill cuts a prompt at the chunk size wherever it falls: a prompt one
token longer than a multiple of it ends with a pass of one new token.
"""

from __future__ import annotations

import os

import pytest
import torch

from batches import assert_dump, dumped, make_batch, slices


@pytest.mark.parametrize("chunks", [[12, 1], [5, 5, 1]], ids=["12+1", "5+5+1"])
@pytest.mark.parametrize("cpu_mirrors", [True, False], ids=["cpu-lists", "gpu-only"])
def test_a_one_token_last_chunk_completes_the_prompt(new_capture, chunks, cpu_mirrors):
    cap = new_capture()
    full = sum(chunks)
    path = os.path.join(cap.dump_dir, "long.pt")
    parts = []
    prefix = 0
    for n, size in enumerate(chunks):
        # each pass also carries a short prompt of its own, whole
        batch, ids, hidden, aux = make_batch(["long", f"short-{n}"], [size, 3], [prefix, 0],
                                             [full, 3], seed=n)
        if not cpu_mirrors:  # sglang's gpu-only path: the lengths as tensors only
            batch.extend_seq_lens_cpu = batch.extend_prefix_lens_cpu = None
        cap.on_forward(batch, ids, hidden, aux)
        assert cap.flush(timeout=10)
        mine, short = slices((ids, hidden, aux), [size, 3])
        parts.append(mine)
        assert_dump(os.path.join(cap.dump_dir, f"short-{n}.pt"), *short, f"short-{n}")
        prefix += size
        if prefix < full:  # the prompt is not whole yet: no file that a client would trust
            assert not os.path.exists(path), f"long.pt written after {prefix} of {full} tokens"
    want = [torch.cat([p[i] for p in parts]) for i in range(3)]
    assert want[0].shape == (full,)
    assert_dump(path, *want, "long")
    assert dumped(cap.dump_dir) == ["long.pt"] + [f"short-{n}.pt" for n in range(len(chunks))]
    stats = cap.stats_snapshot()
    assert stats["skipped"].get("incomplete", 0) == 0 and stats["partials"] == 0
