# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job's conversations path gives the ``input_ids`` and ``loss_mask`` SpecForge's own
preprocessing gives, for every chat template SpecForge 0.2.0 ships that the job supports.

Both sides get the same conversations and the same tokenizer: a small word-level
tokenizer (``tokenizers``) whose Jinja chat template (lab/fixtures/chat_templates/)
renders as the template's model family does, with the template's markers as special tokens, in two kinds: words and
newlines as tokens of their own, and byte-level words as GPT-2's regex splits them,
where a space or a newline at a marker's end is joined with what follows it (so a
token spans the marker's edge, as with Llama's and Qwen's tokenizers). SpecForge runs
``specforge.data.preprocessing.build_eagle3_dataset`` (``datasets``, in memory, its
caches under tmp_path); the job runs ``ConversationTokenizer`` with the template's
assistant header, end-of-turn marker, system prompt and ignore tokens, as a user
configures them. Conversations: one turn with the template's system prompt, a system
prompt from the data, three rounds, one that ends on a user turn, and a long one that
``max_length`` cuts inside an assistant reply.

Skipped, because the job needs an assistant header and an end-of-turn marker and
finds replies with SpecForge's general pattern only:

* ``gpt-oss``: openai-harmony parser, no header or end-of-turn marker;
* ``deepseek-r1-distill``: no end-of-turn marker;
* ``qwen3-thinking``, ``qwen3-next-thinking``, ``kimi-k2-thinking``,
  ``kimi-k3-thinking``, ``deepseek-v32``, ``qwen3.5``: the thinking parser;
* ``inkling-thinking``: the thinking parser and the inkling reply pattern;
* ``glm-5.2``: the glm parser and reply pattern;
* ``longcat``: the longcat reply pattern ("[Round N] USER:" ends a reply).
"""
import os
import re

import pytest

from eagle3_extraction_job import chat

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
datasets = pytest.importorskip("datasets")
template_module = pytest.importorskip("specforge.data.template")
preprocessing = pytest.importorskip("specforge.data.preprocessing")

# SpecForge says so for every conversation with its own system prompt: expected here
pytestmark = pytest.mark.filterwarnings("ignore:The first message is from system:UserWarning")

SKIPPED = {"gpt-oss", "deepseek-r1-distill", "qwen3-thinking", "qwen3-next-thinking",
           "kimi-k2-thinking", "kimi-k3-thinking", "deepseek-v32", "qwen3.5",
           "inkling-thinking", "glm-5.2", "longcat"}

# How each family renders a conversation (add_generation_prompt is False on both sides)
TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "lab", "fixtures", "chat_templates")


def family_templates():
    """{SpecForge template name: the Jinja chat template of its model family}."""
    found = {}
    for name in os.listdir(TEMPLATE_DIR):
        if name.endswith(".jinja"):
            with open(os.path.join(TEMPLATE_DIR, name), encoding="utf-8") as f:
                found[name[:-len(".jinja")]] = f.read()
    return found


FAMILY_TEMPLATES = family_templates()

STORY = ("once upon a time there was a small robot who liked to count the stars , and every "
         "night it counted one more than the night before until the sky ran out .")
CONVERSATIONS = [
    [{"role": "user", "content": "hello how are you ?"},
     {"role": "assistant", "content": "fine thanks ."}],
    [{"role": "system", "content": "be brief and kind ."},
     {"role": "user", "content": "what is two plus two ?"},
     {"role": "assistant", "content": "four ."}],
    [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi , how can I help ?"},
     {"role": "user", "content": "what is two plus two ?"}, {"role": "assistant", "content": "four"},
     {"role": "user", "content": "and three plus three ?"}, {"role": "assistant", "content": "six ."}],
    [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
     {"role": "user", "content": "thanks , bye"}],
    # the longest: max_length cuts it inside its last reply
    [{"role": "user", "content": "tell me a story ."}, {"role": "assistant", "content": STORY},
     {"role": "user", "content": "again , please"}, {"role": "assistant", "content": STORY}],
]
LONGEST = len(CONVERSATIONS) - 1
MARKER = re.compile(r"<[^<>\s]+>")  # <|im_end|>, <｜User｜>, <role>, <end_of_turn>, ...


def supported_templates():
    names = template_module.TEMPLATE_REGISTRY.get_all_template_names()
    return [name for name in names if name not in SKIPPED]


def pre_tokenizer(kind):
    if kind == "bytes":  # GPT-2's regex: " fine", "\n\n" at the end of a text
        return tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"[^\S\n]+"), behavior="removed"),
        tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"\n"), behavior="isolated"),
        tokenizers.pre_tokenizers.Punctuation(behavior="isolated")])


def fast_tokenizer(vocab, special, jinja, kind):
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizer(kind)
    if kind == "bytes":
        tok.decoder = tokenizers.decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                                additional_special_tokens=special)
    fast.chat_template = jinja
    return fast


def word_tokenizer(jinja, template, kind):
    """A word-level fast tokenizer over the words of the conversations as the template
    renders them (with and without the template's system prompt); the markers are
    special tokens."""
    render = fast_tokenizer({"[UNK]": 0}, [], jinja, kind)
    system = [{"role": "system", "content": template.system_prompt or "none"}]
    texts = [render.apply_chat_template(msgs, tokenize=False)
             for conv in CONVERSATIONS for msgs in (conv, system + conv)]
    special = sorted({marker for text in texts for marker in MARKER.findall(text)})
    # the text between markers, as the tokenizer sees it once the markers are split off
    between = [part for text in texts for part in MARKER.split(text) if part]
    words = sorted({piece for part in between
                    for piece, _span in pre_tokenizer(kind).pre_tokenize_str(part)})
    vocab = {w: i for i, w in enumerate(["[UNK]"] + special + words)}
    return fast_tokenizer(vocab, special, jinja, kind)


def specforge_rows(name, jinja, template, max_length, kind):
    """SpecForge's (input_ids, loss_mask) per conversation, in CONVERSATIONS' order."""
    rows = [{"id": str(n), "conversations": conv} for n, conv in enumerate(CONVERSATIONS)]
    # build_eagle3_dataset shuffles (seed 42) and drops the ids: the same shuffle orders them
    order = [int(i) for i in datasets.Dataset.from_list(rows).shuffle(seed=42)["id"]]
    built = preprocessing.build_eagle3_dataset(
        datasets.Dataset.from_list(rows), word_tokenizer(jinja, template, kind), chat_template=name,
        max_length=max_length, num_proc=None)
    out = [None] * len(rows)
    for n, row in zip(order, built):
        out[n] = (row["input_ids"][0].tolist(), row["loss_mask"][0].tolist())
    return out


def job_rows(jinja, template, max_length, kind):
    enc = chat.ConversationTokenizer(
        word_tokenizer(jinja, template, kind), assistant_header=template.assistant_header,
        end_of_turn=template.end_of_turn_token, system_prompt=template.system_prompt or "",
        max_length=max_length, ignore_tokens=template.ignore_token or ())
    return [tuple(a.tolist() for a in enc.encode(conv)) for conv in CONVERSATIONS]


@pytest.fixture(autouse=True)
def datasets_caches_in_tmp(tmp_path, monkeypatch):
    """``datasets`` writes nothing outside tmp_path (not into the repo, not into ~)."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    datasets.disable_caching()
    yield
    datasets.enable_caching()


def test_every_template_the_job_supports_has_a_family_rendering():
    """A template SpecForge adds is tested here or listed as skipped, never silently left out."""
    assert sorted(supported_templates()) == sorted(FAMILY_TEMPLATES)


@pytest.mark.parametrize("kind", ["words", "bytes"])
@pytest.mark.parametrize("name", sorted(FAMILY_TEMPLATES))
def test_the_job_tokenizes_conversations_as_specforge_does(name, kind):
    template = template_module.TEMPLATE_REGISTRY.get(name)
    jinja = FAMILY_TEMPLATES[name]
    whole = job_rows(jinja, template, 0, kind)
    # a cut inside the longest conversation's last reply
    cut = len(whole[LONGEST][0]) - 5
    assert all(len(ids) < cut for ids, _mask in whole[:LONGEST])
    for max_length, expect_cut in ((4096, False), (cut, True)):
        ours = job_rows(jinja, template, max_length, kind)
        theirs = specforge_rows(name, jinja, template, max_length, kind)
        for n, ((ids, mask), (sf_ids, sf_mask)) in enumerate(zip(ours, theirs)):
            where = f"{name}, {kind}, conversation {n}, max_length {max_length}"
            assert 0 not in ids, where  # no [UNK]: the vocabulary holds every word
            assert ids == sf_ids, where
            assert mask == sf_mask, where
        assert (len(ours[LONGEST][0]) == cut) == expect_cut
        # every conversation trains on something; the cut one on its last reply's start
        assert all(sum(mask) > 0 for _ids, mask in ours)
        assert ours[LONGEST][1][-1] == 1
