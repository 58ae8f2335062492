# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the dataset (JSON Lines) and keeping this host's shard.

A line is either pre-tokenized (``id``, ``input_ids``, ``loss_mask``: same length,
token ids >= 0, mask 0/1) or a conversation (``id``, ``conversations``: a list of
role/content turns) that :mod:`eagle3_extraction_job.chat` turns into the same
fields. A bad line is reported with its line number and id (as far as it can be
read) and skipped; the good lines go on. Each bad line is counted and named by one
shard, the one its id belongs to (:func:`bad_line_shard`). Every line is read (ids must be unique across the whole dataset, and
the file's sha256 is the card's provenance), but only this shard's samples are
kept in memory, their token ids as compact ``array('q')``.
"""
import array
import dataclasses
import hashlib
import json
import re

from eagle3_extraction_job import names


@dataclasses.dataclass
class Sample:
    sample_id: str
    input_ids: array.array = None
    loss_mask: array.array = None
    conversations: list = None   # set until the chat template turned it into tokens
    line: int = 0

    @property
    def tokens(self):
        return len(self.input_ids)


# an id is named whole up to the longest a sample id may be; a longer one (a bad line for that
# alone, and maybe huge) is cut there, saying so and how long it is: the message names its line
ID_SHOWN = names.SAMPLE_ID_MAX


@dataclasses.dataclass
class BadLine:
    line: int
    sample_id: object   # the line's own id as read (str, int or float), None when unreadable
    reason: str

    def __str__(self):
        ident = self.sample_id
        if ident is None:
            ident = "no id"
        elif isinstance(ident, str) and len(ident) > ID_SHOWN:
            ident = f"id {ident[:ID_SHOWN]!r}..., cut: {len(ident):,} characters"
        else:
            ident = f"id {ident!r}"
        return f"line {self.line} ({ident}): {self.reason}"


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _shown_id(value):
    """An id worth naming in a message: a string or a number (not a bool, a list...)."""
    if isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    return None


def readable_id(raw):
    """The line's own ``id`` (a top-level key), read as far as the line is whole JSON.

    A line cut short (``{"id": "s7", "input_ids": [1, 2``) or otherwise broken after its
    id still names it; a key ``id`` inside another value does not count, and a number that
    ends where the line ends (it may have been cut) is not taken. ``None`` when unreadable.
    """
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    pos = _SPACE.match(text, 0).end()
    if text[pos:pos + 1] != "{":
        return None
    pos += 1
    while True:
        pos = _SPACE.match(text, pos).end()
        if text[pos:pos + 1] != '"':
            return None
        try:
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _SPACE.match(text, pos).end()
            if text[pos:pos + 1] != ":":
                return None
            pos = _SPACE.match(text, pos + 1).end()
            value, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        pos = _SPACE.match(text, pos).end()
        if key == "id":
            if not isinstance(value, str) and pos >= len(text):
                return None
            return _shown_id(value)
        if text[pos:pos + 1] != ",":
            return None
        pos += 1


@dataclasses.dataclass
class Scan:
    samples: list            # this shard's good samples, in file order
    bad_lines: list
    dataset_samples: int     # good lines in the whole file, every shard
    sha256: str
    lines: int


def shard_of(sample_id, count):
    """The shard a sample belongs to: stable across runs, hosts and Python versions."""
    digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def bad_line_shard(bad, count):
    """The one shard that counts and names a bad line: every shard reads every line, so
    each would report it. The shard its id belongs to (as a sample with that id would);
    shard 0 for a line without a readable id. Summed over the shards, each bad line
    counts once."""
    if bad.sample_id is None:
        return 0
    return shard_of(str(bad.sample_id), count)


def _int_list(value, what, allowed=None):
    if not isinstance(value, list) or not value:
        raise ValueError(f"{what} must be a non-empty list of integers")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v >= 2**63:
            raise ValueError(f"{what} holds {v!r}, not a token id >= 0")
        if allowed is not None and v not in allowed:
            raise ValueError(f"{what} holds {v!r}, expected only 0 and 1")
    return array.array("q", value)


def parse_record(record, dataset_format="auto"):
    """One decoded line -> :class:`Sample` (tokens or conversations); raises ValueError."""
    if not isinstance(record, dict):
        raise ValueError("a line must be a JSON object")
    sample_id = record.get("id")
    if not names.valid_sample_id(sample_id):
        raise ValueError(f"id must match {names.SAMPLE_ID_RE.pattern}")
    fmt = dataset_format
    if fmt == "auto":
        fmt = "conversations" if "conversations" in record and "input_ids" not in record \
            else "tokenized"
    if fmt == "tokenized":
        for key in ("input_ids", "loss_mask"):
            if key not in record:
                raise ValueError(f"missing {key}")
        ids = _int_list(record["input_ids"], "input_ids")
        mask = _int_list(record["loss_mask"], "loss_mask", allowed=(0, 1))
        if len(ids) != len(mask):
            raise ValueError(f"input_ids has {len(ids)} tokens but loss_mask {len(mask)}")
        return Sample(sample_id, input_ids=ids, loss_mask=mask)
    turns = record.get("conversations")
    if not isinstance(turns, list) or not turns:
        raise ValueError("conversations must be a non-empty list of turns")
    for n, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise ValueError(f"conversations[{n}] is not an object")
        role = turn.get("role", turn.get("from"))
        content = turn.get("content", turn.get("value"))
        if not isinstance(role, str) or not isinstance(content, str):
            raise ValueError(f"conversations[{n}] needs string role and content")
    return Sample(sample_id, conversations=turns)


def has_conversations(path, dataset_format="auto"):
    """Whether some line of the file is a conversation (needs the tokenizer): read as bytes, a
    line parsed only when it names the key, up to the first such line."""
    if dataset_format == "tokenized":
        return False
    with open(path, "rb") as f:
        for raw in f:
            if b'"conversations"' not in raw:
                continue
            try:
                if parse_record(json.loads(raw), dataset_format).conversations is not None:
                    return True
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue
    return False


def scan(path, shard_index=0, shard_count=1, dataset_format="auto"):
    """Read the whole file once: this shard's samples, the bad lines, the sha256."""
    digest = hashlib.sha256()
    samples, bad = [], []
    first_line = {}
    good = 0
    lineno = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            digest.update(raw)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                sample = parse_record(record, dataset_format)
            except (ValueError, UnicodeDecodeError) as exc:
                bad.append(BadLine(lineno, readable_id(raw), str(exc)))
                continue
            except RecursionError:
                # json's decoder recurses once per level: a line nested thousands deep is a bad line like
                # any other, not a crash at every start
                bad.append(BadLine(lineno, readable_id(raw), "nested too deep to read as JSON"))
                continue
            if sample.sample_id in first_line:
                bad.append(BadLine(lineno, sample.sample_id,
                                   f"duplicate id (first on line {first_line[sample.sample_id]})"))
                continue
            first_line[sample.sample_id] = lineno
            good += 1
            if shard_of(sample.sample_id, shard_count) == shard_index:
                sample.line = lineno
                samples.append(sample)
    return Scan(samples=samples, bad_lines=bad, dataset_samples=good,
                sha256=digest.hexdigest(), lines=lineno)
