# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SpecForge 0.2.0's server-capture request (``POST /generate``), read and checked.

The body (``specforge/inference/adapters/server_capture.py``): ``input_ids`` (one list per
prompt), ``extra_key``, ``sampling_params`` and ``spec_capture`` (one object per prompt:
``store_id``, ``sample_id``, ``gen``, ``replace``, ``features`` ``{"aux": name,
"last_hidden": name}``, ``passthrough`` ``[{name, data, shape, dtype}]``).

A body that is not this shape is refused whole (:class:`BadRequest`, HTTP 400); a prompt
whose own ids or ``spec_capture`` entry are wrong gets that row's error and the others go on.
"""
import array
import dataclasses
import re

# Mooncake keys are "{store_id}/{sample_id}/g{gen}/{name}": no "/" inside a part, nothing
# a log or a key parser could trip on. SpecForge's sample ids are "<run_id>:<task_id>".
STORE_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:=+@-]{0,127}")
SAMPLE_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:=+@-]{0,255}")
FEATURE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
ARTIFACTS = ("aux", "last_hidden")
SPEC_KEYS = {"store_id", "sample_id", "gen", "replace", "features", "passthrough"}
PASSTHROUGH_KEYS = {"name", "data", "shape", "dtype"}
MAX_GEN = 1 << 31
MAX_TOKEN_ID = 1 << 31
INT64 = (-(1 << 63), (1 << 63) - 1)
MAX_TRAILING = 1 << 20   # elements a token of a passthrough tensor may carry


class BadRequest(ValueError):
    """The body is not SpecForge's server-capture request: refused whole."""


class BadEntry(ValueError):
    """One prompt's ids or spec_capture entry are wrong: that row's error."""


@dataclasses.dataclass
class Passthrough:
    name: str
    data: list
    shape: tuple


@dataclasses.dataclass
class CaptureSpec:
    store_id: str
    sample_id: str
    gen: int
    replace: bool
    features: dict            # artifact ("aux" / "last_hidden") -> feature name
    passthrough: list         # [Passthrough]

    def key(self, name):
        """``{store_id}/{sample_id}/g{gen}/{name}``: MooncakeFeatureStore's key layout."""
        return f"{self.store_id}/{self.sample_id}/g{self.gen}/{name}"

    def names(self):
        return list(self.features.values()) + [p.name for p in self.passthrough]


@dataclasses.dataclass
class Prompt:
    """One prompt of a request: its ids (int64, as the drain's check reads them) and its
    capture spec, or why it cannot be served (``error``)."""
    index: int
    input_ids: array.array = None
    spec: CaptureSpec = None
    error: str = ""


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def parse_ids(raw):
    if not isinstance(raw, list) or not raw or not all(
            _is_int(i) and 0 <= i < MAX_TOKEN_ID for i in raw):
        raise BadEntry("input_ids: expected a non-empty list of token ids")
    return array.array("q", raw)


def parse_spec(raw, tokens):
    """One ``spec_capture`` entry for a prompt of ``tokens`` tokens -> :class:`CaptureSpec`."""
    if not isinstance(raw, dict):
        raise BadEntry("spec_capture: expected an object")
    unknown = sorted(set(raw) - SPEC_KEYS)
    if unknown:
        raise BadEntry(f"spec_capture: unknown keys {unknown}")
    for key, pattern in (("store_id", STORE_ID_RE), ("sample_id", SAMPLE_ID_RE)):
        if not isinstance(raw.get(key), str) or not pattern.fullmatch(raw[key]):
            raise BadEntry(f"spec_capture.{key}={raw.get(key)!r}: expected {pattern.pattern}")
    gen = raw.get("gen", 1)
    if not _is_int(gen) or not 1 <= gen < MAX_GEN:
        raise BadEntry(f"spec_capture.gen={gen!r}: expected an integer >= 1")
    replace = raw.get("replace", False)
    if not isinstance(replace, bool):
        raise BadEntry(f"spec_capture.replace={replace!r}: expected true or false")
    features = raw.get("features") or {}
    if not isinstance(features, dict) or set(features) - set(ARTIFACTS):
        raise BadEntry(f"spec_capture.features: expected an object with keys among {ARTIFACTS}")
    for artifact, name in features.items():
        if not isinstance(name, str) or not FEATURE_NAME_RE.fullmatch(name):
            raise BadEntry(f"spec_capture.features.{artifact}={name!r}: expected "
                           f"{FEATURE_NAME_RE.pattern}")
    raw_pass = raw.get("passthrough") or []
    if not isinstance(raw_pass, list):
        raise BadEntry("spec_capture.passthrough: expected a list")
    passthrough = [parse_passthrough(item, tokens) for item in raw_pass]
    spec = CaptureSpec(raw["store_id"], raw["sample_id"], gen, replace, dict(features),
                       passthrough)
    all_names = spec.names()
    if not all_names:
        raise BadEntry("spec_capture: no feature and no passthrough: nothing to store")
    if len(set(all_names)) != len(all_names):
        raise BadEntry(f"spec_capture: a feature name is given twice: {all_names}")
    return spec


def parse_passthrough(item, tokens):
    if not isinstance(item, dict) or set(item) != PASSTHROUGH_KEYS:
        raise BadEntry(f"spec_capture.passthrough: each item is an object with exactly "
                       f"{sorted(PASSTHROUGH_KEYS)}")
    name = item["name"]
    if not isinstance(name, str) or not FEATURE_NAME_RE.fullmatch(name):
        raise BadEntry(f"spec_capture.passthrough.name={name!r}: expected {FEATURE_NAME_RE.pattern}")
    if item["dtype"] != "int64":
        raise BadEntry(f"spec_capture.passthrough {name}: dtype={item['dtype']!r}, only int64 is stored")
    shape = item["shape"]
    if not isinstance(shape, list) or len(shape) < 2 or not all(_is_int(d) and d >= 1 for d in shape):
        raise BadEntry(f"spec_capture.passthrough {name}: shape={shape!r}: expected [1, T, ...]")
    trailing = 1
    for dim in shape[2:]:
        trailing *= dim
    if shape[0] != 1 or shape[1] != tokens or trailing > MAX_TRAILING:
        raise BadEntry(f"spec_capture.passthrough {name}: shape={shape!r}: expected [1, {tokens}, ...] "
                       "(the prompt's length)")
    data = item["data"]
    if not isinstance(data, list) or len(data) != tokens * trailing or not all(
            _is_int(v) and INT64[0] <= v <= INT64[1] for v in data):
        raise BadEntry(f"spec_capture.passthrough {name}: data: expected {tokens * trailing} int64 "
                       f"values for shape {shape}")
    return Passthrough(name, data, tuple(shape))


def parse_body(body, max_prompts):
    """The request's prompts, in its order; raises :class:`BadRequest` for a bad body."""
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    ids = body.get("input_ids")
    specs = body.get("spec_capture")
    if isinstance(ids, list) and ids and all(_is_int(i) for i in ids):
        ids, specs = [ids], [specs] if isinstance(specs, dict) else specs   # one prompt
    if not isinstance(ids, list) or not ids:
        raise BadRequest("input_ids: expected a list of prompts (lists of token ids)")
    if len(ids) > max_prompts:
        raise BadRequest(f"{len(ids)} prompts in one request, at most {max_prompts}")
    if not isinstance(specs, list) or len(specs) != len(ids):
        raise BadRequest("spec_capture: expected one object per prompt (this gateway serves "
                         "SpecForge's server-capture requests only)")
    prompts = []
    for index, (raw_ids, raw_spec) in enumerate(zip(ids, specs)):
        prompt = Prompt(index)
        try:
            prompt.input_ids = parse_ids(raw_ids)
            prompt.spec = parse_spec(raw_spec, len(prompt.input_ids))
        except BadEntry as exc:
            prompt.error = str(exc)
        prompts.append(prompt)
    seen = set()
    for prompt in prompts:   # two rows writing the same keys would race: the later ones fail
        if prompt.spec is not None:
            identity = (prompt.spec.store_id, prompt.spec.sample_id, prompt.spec.gen)
            if identity in seen:
                prompt.error = (f"spec_capture: sample {prompt.spec.sample_id!r} gen "
                                f"{prompt.spec.gen} is given twice in this request")
            seen.add(identity)
    return prompts
