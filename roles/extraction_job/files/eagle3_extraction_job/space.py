# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disk space: what a shard will write, whether it fits, and the watermarks.

A token costs ``2 x H x (1 + K)`` bytes of bf16 hidden states (the final state
and K captured layers) plus 16 bytes of int64 ``input_ids`` and ``loss_mask``:
57,360 bytes for Kimi-K2 (H 7168, K 3). Each file adds torch.save's zip
framing, counted as ``FILE_OVERHEAD`` bytes.
"""
import dataclasses
import json
import os
import re

FILE_OVERHEAD = 4096


class NotEnoughSpace(RuntimeError):
    """The output disk cannot hold what the shard will write."""


class NotDurable(RuntimeError):
    """The output dir is on a memory filesystem: lost on reboot."""


# filesystems held in memory: output there is lost on reboot (and a tmpfs shares the dump dir's memory)
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")
_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


def filesystem_type(path, mountinfo="/proc/self/mountinfo"):
    """The type of the filesystem ``path`` is (or will be) on, from the kernel's mount table: the
    last mount at the longest mount point over it (links resolved; a mount point exists, so a
    path not made yet is on its nearest existing dir's). None when unknown."""
    target = os.path.realpath(path)
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        left, _sep, right = line.partition(" - ")
        fields, kind = left.split(), right.split()
        if len(fields) < 5 or not kind:
            continue
        point = _MOUNTINFO_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
        if target == point or target.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best[0]):
                best = (point, kind[0])
    return best[1] if best else None


def check_durable(output_dir, fs_type=None):
    """Raise :class:`NotDurable` when the output dir is on a memory filesystem (fs_type: the
    function that reads it, default :func:`filesystem_type`)."""
    kind = (fs_type or filesystem_type)(output_dir)
    if kind in MEMORY_FILESYSTEMS:
        raise NotDurable(
            f"output_dir={output_dir!r} is on a {kind}, in memory: the output would be lost on "
            "reboot (and share the dump dir's memory); give extraction_job_output_root a dir on "
            "durable storage")


def bytes_per_token(hidden_size, captured_layers):
    return 2 * hidden_size * (1 + captured_layers) + 16


def model_config_int(model_path, key):
    """A positive integer of the model's ``config.json`` (or its ``text_config``), or None."""
    with open(os.path.join(model_path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    for section in (config, config.get("text_config") or {}, config.get("language_config") or {}):
        value = section.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def hidden_size_from_model(model_path):
    """``hidden_size`` from the model's ``config.json`` (or its ``text_config``)."""
    value = model_config_int(model_path, "hidden_size")
    if value is None:
        raise ValueError(f"{model_path}/config.json has no positive hidden_size")
    return value


@dataclasses.dataclass
class Usage:
    """A filesystem's size, the bytes in use and the bytes an unprivileged writer may still use."""
    total: int
    free: int
    used: int = -1

    def __post_init__(self):
        if self.used < 0:
            self.used = self.total - self.free

    @property
    def used_fraction(self):
        return self.used / self.total if self.total else 1.0


def usage(path):
    st = os.statvfs(path)
    # blocks reserved for root are neither free to us nor in use: used counts f_bfree
    return Usage(total=st.f_blocks * st.f_frsize, free=st.f_bavail * st.f_frsize,
                 used=(st.f_blocks - st.f_bfree) * st.f_frsize)


def estimate(samples, tokens, hidden_size, captured_layers):
    return tokens * bytes_per_token(hidden_size, captured_layers) + samples * FILE_OVERHEAD


# the units a size is said in, largest first: the largest the size holds at least one of
UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def size_text(n):
    """A size in the largest unit it holds one of ("40.0 MiB", "2.5 GiB"; "900 bytes"): in GiB
    alone, what is left of a small disk read "0.0 GiB"."""
    for unit, scale in UNITS:
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,} bytes"


def check_fits(output_dir, samples, tokens, hidden_size, captured_layers, margin, floor,
               usage_fn=usage):
    """Raise :class:`NotEnoughSpace`, with the numbers, unless the rest of the shard fits."""
    need = estimate(samples, tokens, hidden_size, captured_layers)
    want = int(need * (1 + margin)) + floor
    free = usage_fn(output_dir).free
    if want > free:
        raise NotEnoughSpace(
            f"the shard still has {samples:,} samples, {tokens:,} tokens x "
            f"{bytes_per_token(hidden_size, captured_layers):,} bytes a token (hidden size "
            f"{hidden_size}, {captured_layers} captured layers) = {size_text(need)}; with a "
            f"{margin:.0%} margin and the {size_text(floor)} floor that is {size_text(want)}, but "
            f"{output_dir} has {size_text(free)} free")
    return need, free


class Gate:
    """Whether sending may go on: hysteresis on /dev/shm use and output free space.

    Closed above ``shm_high`` of the dump dir's filesystem in use or below
    ``out_floor`` bytes free on the output disk; opens again only under ``shm_low``
    and above ``out_resume``.
    """

    def __init__(self, dump_dir, output_dir, shm_high, shm_low, out_floor, out_resume,
                 usage_fn=usage):
        self.dump_dir, self.output_dir = dump_dir, output_dir
        self.shm_high, self.shm_low = shm_high, shm_low
        self.out_floor, self.out_resume = out_floor, out_resume
        self.usage_fn = usage_fn
        self.closed_reason = ""
        self.shm = Usage(0, 0)
        self.out = Usage(0, 0)

    def update(self):
        self.shm = self.usage_fn(self.dump_dir)
        self.out = self.usage_fn(self.output_dir)
        if self.closed_reason:
            if self.shm.used_fraction <= self.shm_low and self.out.free >= self.out_resume:
                self.closed_reason = ""
        else:
            if self.shm.used_fraction >= self.shm_high:
                self.closed_reason = (f"{self.dump_dir}: {self.shm.used_fraction:.0%} used, "
                                      f"above the {self.shm_high:.0%} high watermark")
            elif self.out.free < self.out_floor:
                # "output disk full" first: status.yml's table shows the reason's start
                self.closed_reason = (f"output disk full: {self.output_dir}: {size_text(self.out.free)} "
                                      f"free, under the {size_text(self.out_floor)} floor")
        return not self.closed_reason
