# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Conversations -> ``input_ids`` and ``loss_mask``, the way SpecForge's preprocessing does it.

SpecForge (``specforge/data/parse.py``, ``GeneralParser``) renders the turns with the
tokenizer's own chat template (``apply_chat_template(tokenize=False)``), tokenizes
the text without adding special tokens, and marks as trained (1) the tokens of each
assistant reply: the text after the template's assistant header up to and
including its end-of-turn token, then untrains every occurrence of the template's
``ignore_token`` strings anywhere in the text (Qwen3's empty ``<think>`` block). We do
the same with ``transformers`` (the tokenizer and its template are the model's), and
find tokens as SpecForge does: the text up to a character encodes to N tokens, so
the token at that character is number N. Where a token spans a marker's edge (a
header that ends in a space or a newline the tokenizer joins with what follows),
this is what decides whether it is trained, and SpecForge's answer is the one its
trainer expects.
"""
import array
import re


class ChatTemplateError(ValueError):
    """A conversation cannot be turned into tokens."""


def _normalize(turn):
    role = turn.get("role", turn.get("from", ""))
    content = turn.get("content")
    if content is None:
        content = turn.get("value") or ""
    role = {"human": "user", "gpt": "assistant"}.get(role, role)
    return {"role": role, "content": content}


class ConversationTokenizer:
    """Holds one tokenizer; :meth:`encode` turns a conversation into two arrays."""

    def __init__(self, tokenizer, assistant_header, end_of_turn, system_prompt="",
                 max_length=0, ignore_tokens=()):  # pylint: disable=too-many-arguments
        if not assistant_header or not end_of_turn:
            raise ChatTemplateError(
                "conversations need the chat template's assistant header and end-of-turn "
                "token (chat_assistant_header, chat_end_of_turn)")
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.max_length = max_length
        self.pattern = re.compile(
            re.escape(assistant_header) + r"([\s\S]*?(?:" + re.escape(end_of_turn) + "|$))")
        if any(not isinstance(t, str) or not t for t in ignore_tokens):
            raise ChatTemplateError("ignore tokens must be non-empty strings")
        self.ignore_tokens = tuple(ignore_tokens)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
        return cls(AutoTokenizer.from_pretrained(path), **kwargs)

    def messages(self, turns):
        turns = [_normalize(t) for t in turns]
        messages = []
        if turns and turns[0]["role"] == "system":
            messages.append(turns.pop(0))
        elif self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        if not turns or turns[0]["role"] != "user":
            raise ChatTemplateError("the first turn after the system prompt must be the user's")
        for prev, turn in zip([None] + turns[:-1], turns):
            if turn["role"] not in ("user", "assistant"):
                raise ChatTemplateError(f"unknown role {turn['role']!r}")
            if prev is not None and prev["role"] == turn["role"]:
                raise ChatTemplateError(f"two {turn['role']} turns in a row")
        messages.extend(turns)
        if not any(m["role"] == "assistant" for m in messages):
            raise ChatTemplateError("no assistant turn: nothing to train on")
        return messages

    def encode(self, turns):
        text = self.tokenizer.apply_chat_template(
            self.messages(turns), tokenize=False, add_generation_prompt=False)
        kwargs = {"add_special_tokens": False}
        if self.max_length:
            kwargs.update(truncation=True, max_length=self.max_length)
        ids = array.array("q", self.tokenizer(text, **kwargs)["input_ids"])
        if not ids:
            raise ChatTemplateError("the conversation gave no tokens")
        replies = [m.span(1) for m in self.pattern.finditer(text)]
        if not replies:
            raise ChatTemplateError(
                "the rendered text has no assistant header: check chat_assistant_header")
        ignored = self._ignored_spans(text)
        cuts = sorted({pos for span in replies + ignored for pos in span})
        tokens_before = dict(zip(cuts, self._token_counts(text, cuts)))
        mask = array.array("q", bytes(8 * len(ids)))
        # replies trained first, then the ignored text untrained wherever it is, in SpecForge's order
        for spans, value in ((replies, 1), (ignored, 0)):
            for start, end in spans:
                first = min(tokens_before[start], len(ids))
                last = min(tokens_before[end], len(ids))
                mask[first:last] = array.array("q", [value] * max(0, last - first))
        return ids, mask

    def _token_counts(self, text, cuts):
        """How many tokens ``text[:cut]`` encodes to, for each cut (one batch)."""
        prefixes = [text[:cut] for cut in cuts]
        encoded = self.tokenizer(prefixes, add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def _ignored_spans(self, text):
        """Every occurrence of each ignore token, as SpecForge finds them (left to right,
        not overlapping), in replies or not."""
        spans = []
        for token in self.ignore_tokens:
            start = text.find(token)
            while start != -1:
                spans.append((start, start + len(token)))
                start = text.find(token, start + len(token))
        return spans
