# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Conversations through a real transformers tokenizer and chat template, and
SpecForge's own offline loader (specforge 0.2.0, installed without deps) reading our files."""
import asyncio
import json
import os

import pytest

from job_helpers import StandinServer, config_for, expected_tensors, torch
from eagle3_extraction_job import chat
from eagle3_extraction_job import job as jobmod

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

SPECIAL = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
WORDS = "hello there how are you fine thanks and what is two plus two four be brief".split()


def tiny_tokenizer():
    """A word-level fast tokenizer with a chat template: small, offline, real transformers."""
    vocab = {w: i for i, w in enumerate(["[UNK]"] + SPECIAL + WORDS + ["?", ".", ","])}
    model = tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [tokenizers.pre_tokenizers.Whitespace()])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                                additional_special_tokens=SPECIAL)
    fast.chat_template = TEMPLATE
    return fast


def encoder(**kw):
    return chat.ConversationTokenizer(tiny_tokenizer(), assistant_header="<|assistant|>\n",
                                      end_of_turn="<|end|>", **kw)


def test_only_assistant_replies_and_their_end_token_are_trained():
    enc = encoder(system_prompt="be brief")
    ids, mask = enc.encode([{"role": "user", "content": "hello how are you ?"},
                            {"role": "assistant", "content": "fine thanks ."},
                            {"from": "human", "value": "what is two plus two ?"},
                            {"from": "gpt", "value": "four"}])
    tok = enc.tokenizer
    words = tok.convert_ids_to_tokens(ids.tolist())
    trained = [w for w, m in zip(words, mask) if m]
    assert trained == ["fine", "thanks", ".", "<|end|>", "four", "<|end|>"]
    assert words[:3] == ["<|system|>", "be", "brief"]
    assert len(ids) == len(mask)


@pytest.mark.parametrize("turns,reason", [
    ([{"role": "assistant", "content": "hello"}], "first turn"),
    ([{"role": "user", "content": "hello"}], "no assistant turn"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "two user turns"),
    ([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}], "unknown role")])
def test_bad_conversations_are_refused_with_a_reason(turns, reason):
    with pytest.raises(chat.ChatTemplateError, match=reason):
        encoder().encode(turns)


def test_the_configured_ignore_tokens_are_never_trained(job_dirs):
    """chat_ignore_tokens reaches the tokenizer: SpecForge's ignore_token, e.g. Qwen3's
    empty think block, untrained even inside a reply."""
    path = job_dirs["root"] / "chat.jsonl"
    path.write_text(json.dumps({"id": "c0", "conversations": [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "fine thanks ."}]}) + "\n", encoding="utf-8")
    cfg = config_for(job_dirs, path, "http://127.0.0.1:1", chat_assistant_header="<|assistant|>\n",
                     chat_end_of_turn="<|end|>", tokenizer_path="/unused",
                     chat_ignore_tokens=["thanks"])
    job = jobmod.Job(cfg, torch, tokenizer_factory=lambda _p, **kw: chat.ConversationTokenizer(
        tiny_tokenizer(), **kw))
    job.load_dataset()
    sample, = job.samples.values()
    words = tiny_tokenizer().convert_ids_to_tokens(sample.input_ids.tolist())
    assert [w for w, m in zip(words, sample.loss_mask) if m] == ["fine", ".", "<|end|>"]


def test_max_length_truncates():
    ids, mask = encoder(max_length=4).encode([{"role": "user", "content": "hello"},
                                              {"role": "assistant", "content": "fine"}])
    assert len(ids) == len(mask) == 4


def test_a_conversation_dataset_runs_end_to_end_and_specforge_reads_it(job_dirs):
    from specforge.algorithms.eagle3.data import normalize_offline_sample
    from specforge.runtime.data_plane.feature_store import load_feature_file
    from specforge.runtime.data_plane.offline_reader import OfflineManifestReader

    path = job_dirs["root"] / "chat.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for n in range(12):
            f.write(json.dumps({"id": f"c{n}", "conversations": [
                {"role": "user", "content": "hello " * (1 + n) + "?"},
                {"role": "assistant", "content": "fine thanks " * (1 + n % 2)}]}) + "\n")
        f.write(json.dumps({"id": "bad", "conversations": [{"role": "user", "content": "x"}]})
                + "\n")

    async def body():
        server = await StandinServer(job_dirs["dump"]).start()
        try:
            cfg = config_for(job_dirs, path, server.url, chat_assistant_header="<|assistant|>\n",
                             chat_end_of_turn="<|end|>", tokenizer_path="/unused")
            job = jobmod.Job(cfg, torch, tokenizer_factory=lambda _p, **kw: chat.ConversationTokenizer(
                tiny_tokenizer(), **kw))
            return await job.run_async(), job
        finally:
            await server.stop()
    code, job = asyncio.run(body())
    assert code == jobmod.EXIT_COMPLETE
    assert [(b.line, b.sample_id) for b in job.scan.bad_lines] == [(13, "bad")]

    refs = OfflineManifestReader(job_dirs["out"], max_len=2048, validate_files=True).read()
    assert len(refs) == 12
    expect = {tuple(s.input_ids.tolist()): s for s in job.samples.values()}
    for ref in refs:
        raw = load_feature_file(ref.feature_store_uri[len("file://"):])
        sample = expect.pop(tuple(raw["input_ids"].tolist()))
        out = normalize_offline_sample(raw, max_len=2048)
        tokens = sample.tokens
        assert out["hidden_state"].shape == (1, tokens, 3 * 16)
        assert out["target"].shape == (1, tokens, 16)
        assert out["input_ids"].shape == out["loss_mask"].shape == (1, tokens)
        _ids, final, aux = expected_tensors(sample.input_ids)
        assert torch.equal(out["target"], final) and torch.equal(out["hidden_state"], aux)
        assert out["loss_mask"][0, :-1].tolist() == sample.loss_mask.tolist()[:-1]
        assert sum(sample.loss_mask) > 0
    assert not expect
    # SpecForge lists every .ckpt under the dir: nothing else of ours ends so
    assert not [n for _r, _d, files in os.walk(job_dirs["out"]) for n in files
                if n.endswith(".ckpt") and not n.startswith("data_")]
