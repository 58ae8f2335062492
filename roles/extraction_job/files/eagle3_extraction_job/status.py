# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The progress file (read by ``playbooks/status.yml``) and the dataset card.

Both are small JSON files replaced atomically, so a reader never sees half of one: the
card by a temporary name, fsync, rename; the progress file by a swap of two files of a
fixed size (``write_status``), so that it is still written while the output disk is full.
"""
import collections
import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import time

STATUS_FORMAT = 1
CARD_FORMAT = 1


# status.json holds what the server answered (last_errors): its owner alone reads it, as
# the job's log dir; the dataset card is for everyone who trains from the output
STATUS_MODE = 0o600
CARD_MODE = 0o644


def write_json_atomic(path, value, mode=CARD_MODE):
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)   # whatever the umask, and a leftover temp file's mode
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# status.json and its spare are each this long, the JSON padded with spaces: written in place,
# a status takes no new block of the disk (a status is a few KB; one that is longer is cut)
STATUS_SLOT_BYTES = 64 * 1024
SPARE_PREFIX = "."
SPARE_SUFFIX = ".spare"
# renameat2(2)'s flag: both names stay, their files swapped in one step
RENAME_EXCHANGE = 2
AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    func = getattr(libc, "renameat2", None)
    if func is not None:
        func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return func


def exchange(first, second):
    """Swap two files' names in one step (renameat2 RENAME_EXCHANGE); False where it could not (an old
    kernel or libc, a filesystem without it: EINVAL, ENOSYS, EXDEV on some overlays...), for the caller
    to rename instead."""
    func = _renameat2()
    if func is None:
        return False
    return func(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0


def slot_text(value):
    """A status as status.json holds it: the JSON, padded with spaces to the slot's length."""
    text = (json.dumps(value, indent=1, sort_keys=True) + "\n").encode("utf-8")
    if len(text) > STATUS_SLOT_BYTES:
        value = dict(value, last_errors=[str(e)[:200] for e in value.get("last_errors", [])][-2:])
        text = (json.dumps(value, indent=1, sort_keys=True) + "\n").encode("utf-8")[:STATUS_SLOT_BYTES]
    return text + b" " * (STATUS_SLOT_BYTES - len(text))


def write_status(path, value, mode=STATUS_MODE):
    """Replace the status file atomically, needing no new block of the disk once it has been written twice.

    The next status is written in place over a spare file of the status file's fixed length
    (``.status.json.spare``), fsync'ed, and the two swapped in one step: the old status becomes the spare.
    A full output disk is the job's most common pause, and the status must say so: a new temporary file
    (``write_json_atomic``) would need blocks the disk no longer has. Where the files cannot be swapped
    (an old kernel, a filesystem without it) the spare is renamed over the status file, and made again the
    next time."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    spare = os.path.join(directory, SPARE_PREFIX + os.path.basename(path) + SPARE_SUFFIX)
    text = slot_text(value)
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT, mode)
    try:
        os.fchmod(fd, mode)
        written = 0
        while written < len(text):
            written += os.pwrite(fd, text[written:], written)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        whole = os.stat(path).st_size == STATUS_SLOT_BYTES
    except FileNotFoundError:
        whole = False
    # a status file of another length (none yet, or written before the slots) is replaced; the next spare
    # is made then
    if not (whole and exchange(spare, path)):
        os.replace(spare, path)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Rate:
    """Tokens a second over the last ``window`` seconds of completions."""

    def __init__(self, window=120.0, clock=time.monotonic):
        self.window, self.clock = window, clock
        self.events = collections.deque()
        self.started = clock()

    def add(self, tokens):
        self.events.append((self.clock(), tokens))

    def per_second(self):
        now = self.clock()
        while self.events and self.events[0][0] < now - self.window:
            self.events.popleft()
        span = min(self.window, now - self.started)
        if span <= 0 or not self.events:
            return 0.0
        return sum(t for _at, t in self.events) / span


def sglang_files_sha256():
    """sha256 of the installed capture module and patched model file, found without importing sglang."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {}
    root = list(spec.submodule_search_locations)[0]
    found = {}
    for key, rel in (("capture_module_sha256", "srt/eagle3_hs_capture.py"),
                     ("patched_model_sha256", "srt/models/deepseek_v2.py")):
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            found[key] = sha256_file(path)
    return found


# the bad lines a card names (its count is of them all): verify's summary shows them
BAD_LINES_SHOWN = 10


def card(cfg, scan, totals, provenance, shard_samples, shard_tokens, complete, bad_lines=()):
    """The dataset card: what the files are and where they came from.

    ``bad_lines``: the dataset's lines this shard counts (``dataset.bad_line_shard``) and
    could not extract; summed over the shards' cards, each bad line counts once."""
    model_config = os.path.join(cfg.model_path, "config.json") if cfg.model_path else ""
    return {
        "format": "specforge-eagle3-offline-ckpt",
        "card_format": CARD_FORMAT,
        "job": cfg.job,
        "host": cfg.host,
        "shard_index": cfg.shard_index,
        "shard_count": cfg.shard_count,
        "dataset_path": cfg.dataset,
        "dataset_sha256": scan.sha256,
        "dataset_samples": scan.dataset_samples,
        "bad_lines": len(bad_lines),
        "bad_lines_shown": [str(bad) for bad in bad_lines[:BAD_LINES_SHOWN]],
        "shard_samples": shard_samples,
        "shard_tokens": shard_tokens,
        "model_path": cfg.model_path,
        "model_config_sha256": sha256_file(model_config) if model_config and os.path.exists(
            model_config) else "",
        "hidden_size": cfg.hidden_size,
        "capture_patch_sha256": cfg.capture_patch_sha256,
        **sglang_files_sha256(),
        "sglang_version": provenance.get("sglang_version", ""),
        "layer_ids": provenance.get("layer_ids", ""),
        "captured_layers": provenance.get("captured_layers", ""),
        "samples": totals["samples"],
        "tokens": totals["tokens"],
        "bytes": totals["bytes"],
        "complete": complete,
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
