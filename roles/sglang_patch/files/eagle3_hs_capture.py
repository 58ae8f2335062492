# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""EAGLE-3 hidden-state capture inside an SGLang server process.

Installed next to sglang's own modules (``sglang/srt/eagle3_hs_capture.py``) by the
``eagle3.extraction.sglang_patch`` role, whose patch to ``models/deepseek_v2.py``
calls :func:`install` at the end of ``DeepseekV2ForCausalLM.__init__`` and
:meth:`HiddenStateCapture.on_forward` in its ``forward()``, right after the model
returned ``(hidden_states, aux_hidden_states)``.

Nothing happens unless ``SGLANG_HS_DUMP_DIR`` is set: :func:`install` then returns
``None`` and the patched ``forward()`` does one attribute test per pass. When it is
set, on TP rank 0 of the last pipeline stage:

* sglang's own ``set_eagle3_layers_to_capture`` turns the aux capture on
  (``SGLANG_HS_LAYER_IDS``, default SpecForge's Kimi-K2 / DeepSeek-V3 ids ``1,29,57``;
  sglang adds 1 to every id when the first id is 1, and the files record both);
* settings under which rank 0 does not hold every row of a batch (DP attention,
  attention-TP scattered input, prefill context parallel) are refused at start:
  gathering the rows would need a collective that the other ranks never join; so is
  two-batch overlap, under which sglang does not capture the aux layers;
* only ``forward_mode == ForwardMode.EXTEND`` passes are captured (decode, MIXED,
  TARGET_VERIFY and the other ``is_extend()`` modes are left alone);
* the token ids come from the ``input_ids`` argument, or from the batch when a
  wrapper passes ``input_ids=None`` (Kimi-K2.5's vision wrapper always does);
* the rid rule: health checks (rid ``HEALTH_CHECK_*``), requests whose rid is 32
  lowercase hex characters (sglang's own ``uuid4().hex``, given to every request
  without a client rid, the start-up warm-up included) and, with
  ``SGLANG_HS_DUMP_RID_PREFIX``, rids without that prefix are never dumped;
* every request that is not dumped is counted by reason in ``CAPTURE_STATS.json``
  (see :data:`SKIP_REASONS`) and each reason is logged the first time it is seen;
* the whole batch goes device-to-host into one of ``SGLANG_HS_MAX_PENDING`` reusable
  staging buffers (pinned memory, allocated at start) on a side stream, queued by the
  dispatcher thread in 16 MiB pieces, so that sglang's own copies wait for one piece,
  not a whole batch (the forward thread only snapshots the tensors); the dispatcher
  thread splits it into requests and stitches the chunks of prompts prefilled over
  several passes by rid and prefix length; writer threads ``torch.save`` one file per
  request as ``<rid>.pt.<pid>.<tag>.tmp`` and link it to ``<rid>.pt``. When every
  buffer is busy the forward waits (backpressure: nothing is dropped);
* a rid's first complete file is never replaced: a later capture of the same rid
  (a retracted request prefilled again) is counted as ``duplicate``;
* a prompt that starts again at token 0 (an aborted request sent again) replaces its
  stale chunks; chunks left longer than ``SGLANG_HS_PARTIAL_TIMEOUT_S`` or beyond
  ``SGLANG_HS_MAX_PARTIAL_GIB`` are dropped and counted as ``incomplete``;
* a full dump dir (ENOSPC) pauses the writers, which retry with backoff while the
  bounded queue holds the forward; a dump dir that is read-only or gone is logged at
  ERROR, written to ``CAPTURE_ERROR.txt`` (space for it is reserved at start), and
  the next captured pass raises :class:`HiddenStateCaptureError`;
* SIGTERM (systemd's stop) writes what the capture holds, within
  ``SGLANG_HS_STOP_TIMEOUT_S``, then ends the process as it would have ended; at
  start, ``*.tmp`` files of processes that are gone are removed (a complete file
  never is).

A file named ``<rid>.pt`` in the dump dir is the only acknowledgement a client may
trust: an HTTP 200 says the forward ran, not that its hidden states were written.

File format (``torch.load(path, weights_only=True)``, SpecForge's keys):
``input_ids[T]``, ``hidden_state[1,T,H]`` (after the final norm),
``aux_hidden_state[1,T,K*H]`` (the K captured layers, concatenated), ``rid``,
``layer_ids``, ``captured_layers``, ``sglang_version``, ``model``, ``format_version``.

Only the standard library is imported at module import; torch is imported when a
capture is actually set up.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import math
import os
import queue
import re
import signal
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger(__name__)

ENV_DUMP_DIR = "SGLANG_HS_DUMP_DIR"
ENV_LAYER_IDS = "SGLANG_HS_LAYER_IDS"
ENV_WRITER_THREADS = "SGLANG_HS_WRITER_THREADS"
ENV_MAX_PENDING = "SGLANG_HS_MAX_PENDING"
ENV_RID_PREFIX = "SGLANG_HS_DUMP_RID_PREFIX"
ENV_CRC32 = "SGLANG_HS_CRC32"
ENV_PARTIAL_TIMEOUT = "SGLANG_HS_PARTIAL_TIMEOUT_S"
ENV_MAX_PARTIAL_GIB = "SGLANG_HS_MAX_PARTIAL_GIB"
ENV_STOP_TIMEOUT = "SGLANG_HS_STOP_TIMEOUT_S"
ENV_STAGING_TOKENS = "SGLANG_HS_STAGING_TOKENS"

# SpecForge's draft config for Kimi-K2 / DeepSeek-V3 (61 layers); sglang captures
# them at [2, 30, 58] (its +1 quirk when the first id is 1).
DEFAULT_LAYER_IDS = (1, 29, 57)
DEFAULT_WRITER_THREADS = 4
DEFAULT_PARTIAL_TIMEOUT_S = 600.0
DEFAULT_MAX_PARTIAL_GIB = 32.0
# systemd's TimeoutStopSec for the unit is 120 s by default: leave it room.
DEFAULT_STOP_TIMEOUT_S = 60.0
# sglang's default chunked-prefill size on an H200: the rows of one pass.
DEFAULT_STAGING_TOKENS = 8192
FORMAT_VERSION = 1
FILE_SUFFIX = ".pt"
ERROR_FILE = "CAPTURE_ERROR.txt"
STATS_FILE = "CAPTURE_STATS.json"
_ERROR_RESERVE = ".capture-error.reserve"
_ERROR_RESERVE_BYTES = 64 * 1024
_STATS_RESERVE_BYTES = 16 * 1024
HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"
# sglang gives a request without a client rid uuid.uuid4().hex (io_struct.py):
# the start-up warm-up is one of those.
_AUTO_RID = re.compile(r"[0-9a-f]{32}")
# <file>.pt.<pid>.<tag>.tmp (this version) or <file>.pt.<tag>.tmp (earlier ones)
_TMP_NAME = re.compile(r".+\.pt\.(?:(?P<pid>[0-9]+)\.)?[0-9a-f]{8}\.tmp")
# the start-up probe, and the stats file's reserved next version
_OTHER_TMP_NAME = re.compile(r"\.(?:capture-probe|CAPTURE_STATS\.json)\.(?P<pid>[0-9]+)\.(?:tmp|next)")
_STATS_INTERVAL_S = 1.0
_SPACE_LOG_INTERVAL_S = 60.0
_SPACE_BACKOFF_MAX_S = 2.0
_STAGING_ALIGN = 64
# A device-to-host copy is queued in pieces of this size (see _HostCopier): about 0.3 ms
# each at the 55 GB/s an H200 copies into pinned memory, so sglang's own copies wait
# that long at most; a few dozen pieces a pass cost the dispatcher thread little.
_COPY_CHUNK_BYTES = 16 << 20

# Why a request was not dumped; the keys of CAPTURE_STATS.json's "skipped".
SKIP_REASONS = {
    "health_check": "a health check (rid HEALTH_CHECK_*): never dumped",
    "warmup": "sglang's start-up warm-up (a rid-less request before any other): never dumped",
    "rid_rule": (
        "a rid of 32 lowercase hex characters, which is what sglang gives a request "
        "without a client rid: never dumped; send every request with a rid of another form"
    ),
    "refused": f"a rid without the {ENV_RID_PREFIX} prefix: not dumped",
    "incomplete": (
        "a prompt whose chunks did not all arrive (aborted, started past token 0, left "
        "too long, or cut by a stop): not dumped; send it again"
    ),
    "duplicate": "a rid whose file already exists: the first file is kept, this capture dropped",
    "write_failed": "its file could not be written: see " + ERROR_FILE,
}

_INSTANCE = None  # the process's capture, once install() made one


class HiddenStateCaptureError(RuntimeError):
    """The capture cannot go on (unwritable dump dir, failed write, bad settings)."""


# -- settings ------------------------------------------------------------------------


def _env_int(environ, name, default, minimum=1, maximum=1 << 20):
    raw = environ.get(name, "")
    if raw == "":
        return default
    value = int(raw) if re.fullmatch(r"[0-9]{1,9}", raw.strip()) else None
    if value is None or not minimum <= value <= maximum:
        raise HiddenStateCaptureError(
            f"{name}={raw!r}: expected an integer from {minimum} to {maximum}"
        )
    return value


def _env_float(environ, name, default, minimum, maximum):
    raw = environ.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and minimum <= value <= maximum):
        raise HiddenStateCaptureError(
            f"{name}={raw!r}: expected a number from {minimum:g} to {maximum:g}"
        )
    return value


def parse_layer_ids(raw):
    """``"1,29,57"`` -> ``(1, 29, 57)``; raises naming the variable on bad input."""
    if raw is None or raw.strip() == "":
        return DEFAULT_LAYER_IDS
    if not re.fullmatch(r"[0-9]{1,4}(,[0-9]{1,4})*", raw.strip()):
        raise HiddenStateCaptureError(
            f"{ENV_LAYER_IDS}={raw!r}: expected comma-separated layer ids >= 0, "
            "e.g. '1,29,57'"
        )
    return tuple(int(part) for part in raw.strip().split(","))


def skip_reason(rid, prefix=""):
    """Why a request is not dumped (a key of :data:`SKIP_REASONS`), or ``None``.

    ``warmup`` and ``rid_rule`` both mean "sglang's own rid"; the capture tells
    them apart by when they come (see :meth:`HiddenStateCapture.on_forward`).
    """
    if not isinstance(rid, str) or not rid:
        return "rid_rule"
    if rid.startswith(HEALTH_CHECK_RID_PREFIX):
        return "health_check"
    if _AUTO_RID.fullmatch(rid):
        return "rid_rule"
    if not rid.startswith(prefix):
        return "refused"
    return None


def wanted_rid(rid, prefix=""):
    """Whether a request is dumped: the rid rule of :func:`skip_reason`."""
    return skip_reason(rid, prefix) is None


def file_name_for(rid):
    """A file name for a rid: safe characters kept, the rest percent-encoded."""
    name = urllib.parse.quote(rid, safe="-_.")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return name + FILE_SUFFIX


def _sglang_tp_rank():
    # not in sglang.srt.distributed's __all__ (0.5.23): import it from its module
    from sglang.srt.distributed.parallel_state import get_tensor_model_parallel_rank

    return get_tensor_model_parallel_rank()


def _sglang_version():
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # not installed as a distribution (a bare checkout)
        return "unknown"


# The settings under which TP rank 0 does not see every row of a pass, by version.
_PARALLEL_SETTINGS_0_5_14 = (  # global server args
    "enable_attn_tp_input_scattered", "enable_prefill_cp", "enable_prefill_context_parallel",
    "enable_dsa_prefill_context_parallel", "attn_cp_size", "enable_dp_attention",
)
_PARALLEL_SETTINGS_0_5_23 = (  # runtime_context.get_parallel()
    "enable_attn_tp_input_scattered", "enable_prefill_cp", "attn_cp_size", "attn_dp_size",
)
# The settings under which the aux layers are not captured: with two-batch overlap,
# DeepseekV2Model.forward runs the layers after the dense ones through the overlapped
# path (model_forward_maybe_tbo / model_forward_stages), which is given no capture list.
# 0.5.14 keeps it in the global server args, 0.5.23 in runtime_context.get_exec().overlap
# (what sglang's own runtime reads).
_AUX_SKIPPING_SETTINGS = ("enable_two_batch_overlap",)


def _setting(source, name):
    # 0.5.23's ParallelContext raises RuntimeError/ValueError for fields not set
    try:
        return getattr(source, name)
    except Exception:  # pylint: disable=broad-except
        return None


def _sglang_server_args():
    """(server args, parallel context) of the running sglang; (None, None) outside it."""
    try:
        from sglang.srt.server_args import get_global_server_args
    except ImportError:  # not inside sglang (tests)
        return None, None
    try:
        return get_global_server_args(), None  # 0.5.14
    except RuntimeError:  # 0.5.23 retired it for the runtime context
        from sglang.srt.runtime_context import get_parallel, get_server_args

        return get_server_args(), get_parallel()


def _sglang_overlap_settings():
    """Where this sglang keeps two-batch overlap: 0.5.23's ``get_exec().overlap``."""
    try:
        from sglang.srt.runtime_context import get_exec
    except ImportError:
        return None
    try:
        return get_exec().overlap
    except Exception:  # pylint: disable=broad-except  # not published in this process
        return None


def _sglang_parallel_settings():
    """``{setting: value}`` of the settings that are on and split a pass's rows or
    leave the aux layers uncaptured."""
    args, parallel = _sglang_server_args()
    if args is None and parallel is None:
        return {}
    if parallel is None:  # 0.5.14: all of them in the server args
        sources = [(args, _PARALLEL_SETTINGS_0_5_14 + _AUX_SKIPPING_SETTINGS)]
    else:
        sources = [(parallel, _PARALLEL_SETTINGS_0_5_23),
                   (_sglang_overlap_settings(), _AUX_SKIPPING_SETTINGS)]
    found = {}
    for source, names in sources:
        for name in names:
            value = _setting(source, name)
            if name.endswith("_size"):
                if isinstance(value, int) and value > 1:
                    found[name] = value
            elif value is True:
                found[name] = True
    return found


def _sglang_chunked_prefill_size():
    """sglang's chunked-prefill size (rows of one pass), or None when unknown."""
    args = _sglang_server_args()[0]
    size = _setting(args, "chunked_prefill_size") if args is not None else None
    return size if isinstance(size, int) and size > 0 else None


def _named(settings):
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def refuse_unsupported_parallelism(settings):
    """Raise, naming the settings, when rank 0 would not see whole batches or the
    model would not hand back every aux layer."""
    splitting = {k: v for k, v in settings.items() if k not in _AUX_SKIPPING_SETTINGS}
    skipping = {k: v for k, v in settings.items() if k in _AUX_SKIPPING_SETTINGS}
    reasons = []
    if splitting:
        reasons.append(
            f"{_named(splitting)}: with attention DP, attention-TP scattered input or "
            "prefill context parallel, TP rank 0 holds only its share of a batch's rows, "
            "and gathering them would run a collective on one rank and hang the server.")
    if skipping:
        reasons.append(
            f"{_named(skipping)}: with two-batch overlap (--enable-two-batch-overlap) "
            "sglang runs the layers after the dense ones as overlapped micro-batches, a "
            "path that captures no aux hidden states, so the files would lack aux layers.")
    if reasons:
        raise HiddenStateCaptureError(
            "hidden-state capture: " + " ".join(reasons)
            + " Turn these off for an extraction server.")


def install(model, tp_rank=None, environ=None, parallel=None):
    """Set up the capture for ``model`` (a ``DeepseekV2ForCausalLM``).

    Returns a :class:`HiddenStateCapture`, or ``None`` when ``SGLANG_HS_DUMP_DIR``
    is unset, on TP ranks other than 0, and on pipeline stages other than the last.
    Raises :class:`HiddenStateCaptureError` on bad settings or an unwritable dir, so
    that the server fails at start rather than serving without dumping.
    ``parallel``: the settings of :func:`_sglang_parallel_settings` (tests).
    """
    environ = os.environ if environ is None else environ
    dump_dir = environ.get(ENV_DUMP_DIR, "")
    if not dump_dir:
        return None
    layer_ids = parse_layer_ids(environ.get(ENV_LAYER_IDS))
    writer_threads = _env_int(environ, ENV_WRITER_THREADS, DEFAULT_WRITER_THREADS, maximum=256)
    max_pending = _env_int(environ, ENV_MAX_PENDING, writer_threads, maximum=256)
    partial_timeout = _env_float(
        environ, ENV_PARTIAL_TIMEOUT, DEFAULT_PARTIAL_TIMEOUT_S, 1.0, 7 * 86400.0)
    max_partial_gib = _env_float(environ, ENV_MAX_PARTIAL_GIB, DEFAULT_MAX_PARTIAL_GIB, 0.0, 65536.0)
    stop_timeout = _env_float(environ, ENV_STOP_TIMEOUT, DEFAULT_STOP_TIMEOUT_S, 0.0, 86400.0)
    staging_tokens = _env_int(environ, ENV_STAGING_TOKENS, 0, minimum=0, maximum=1 << 24)
    # every rank refuses, so that the server stops at start whichever rank looks first
    refuse_unsupported_parallelism(_sglang_parallel_settings() if parallel is None else parallel)
    if tp_rank is None:
        tp_rank = _sglang_tp_rank()
    if tp_rank != 0:
        logger.info("hidden-state capture: TP rank %s does not write (rank 0 does)", tp_rank)
        return None

    model.set_eagle3_layers_to_capture(list(layer_ids))
    if not getattr(model, "capture_aux_hidden_states", False):
        logger.info("hidden-state capture: not the last pipeline stage, nothing to capture")
        return None
    captured = [int(i) for i in model.model.layers_to_capture]
    num_layers = int(model.config.num_hidden_layers)
    if any(not 0 < i < num_layers for i in captured):
        raise HiddenStateCaptureError(
            f"{ENV_LAYER_IDS}={','.join(map(str, layer_ids))}: sglang would capture "
            f"the inputs of layers {captured}, but the model has layers 0..{num_layers - 1} "
            "(a captured index must be between 1 and the last layer)"
        )
    if layer_ids[0] != 1:
        logger.warning(
            "hidden-state capture: layer ids %s do not start with 1, so sglang uses them "
            "as given (no +1): the files hold the inputs of layers %s",
            list(layer_ids), captured,
        )
    global _INSTANCE  # pylint: disable=global-statement
    if (_INSTANCE is not None and not _INSTANCE.closed
            and _INSTANCE.dump_dir == os.path.abspath(dump_dir)):
        # the model class was built again in this process: one writer set is enough
        _INSTANCE.metadata["captured_layers"] = captured
        return _INSTANCE
    metadata = {
        "layer_ids": list(layer_ids),
        "captured_layers": captured,
        "sglang_version": _sglang_version(),
        "model": type(model).__name__,
        "format_version": FORMAT_VERSION,
    }
    hidden_size = int(getattr(model.config, "hidden_size", 0) or 0)
    rows = staging_tokens or _sglang_chunked_prefill_size() or DEFAULT_STAGING_TOKENS
    _INSTANCE = HiddenStateCapture(
        dump_dir,
        metadata=metadata,
        writer_threads=writer_threads,
        max_pending=max_pending,
        rid_prefix=environ.get(ENV_RID_PREFIX, ""),
        crc32=environ.get(ENV_CRC32, "0") not in ("", "0", "false", "False"),
        partial_timeout=partial_timeout,
        max_partial_bytes=int(max_partial_gib * (1 << 30)),
        stop_timeout=stop_timeout,
        staging_bytes=staging_bytes_for(rows, hidden_size, len(captured)) if hidden_size else 0,
    )
    _INSTANCE.install_stop_handler()
    return _INSTANCE


def _staging_layout(sizes):
    """(offsets, total) of pieces of ``sizes`` bytes laid one after another, each aligned:
    the one rule of a staging buffer's layout, for carving it and for sizing it."""
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // _STAGING_ALIGN) * _STAGING_ALIGN
    return offsets, total


def staging_bytes_for(rows, hidden_size, aux_layers):
    """The size of a staging buffer that a pass of ``rows`` new tokens fits without growing.

    The layout of :meth:`_StagingBuffer.views`, piece by piece, each aligned: the ids
    (int64), the final and the aux hidden states (bf16) and the prompts' full lengths
    (``orig_seq_lens``, at most one a row). A buffer that is a few bytes short grows on
    the forward path, and growing is a pinned allocation plus a free that waits for the
    GPU: measured on an H200, 0.75 s a buffer, 6 s of a restart's first minute.
    """
    pieces = (rows * 8, rows * 2 * hidden_size, rows * 2 * hidden_size * aux_layers, rows * 8)
    return _staging_layout(pieces)[1]


def _host_list(cpu_list, tensor):
    if cpu_list is not None:
        return [int(x) for x in cpu_list]
    if tensor is not None:  # sglang's gpu-only path leaves the *_cpu mirrors unset
        return [int(x) for x in tensor.tolist()]
    return None


# -- staging: device to host without stalling the forward ---------------------------


class _HostCopier:
    """Copies device tensors into host tensors without stalling the forward stream.

    CUDA: ``copy`` (the forward thread) only marks where the pass's work ends on the
    forward stream; ``ready`` (the dispatcher thread) copies on a side stream that
    waits for that mark, in pieces of at most ``chunk_bytes``, each waited for before
    the next is queued. The GPU's copy engine serves device-to-host copies one after
    another: sglang's own small copy of a pass's results (on the forward stream, which
    the next pass's kernels follow) queued behind a whole 470 MB batch for 6 to 8.5 ms
    a pass on an H200, 14 % of the server's speed (docs/benchmarks.md, issue 21). With
    one piece queued at a time it waits for one piece at most. The sources stay
    referenced until their last piece landed, so their memory is not reused before.
    CPU (tests): a plain copy, ``ready`` is None.
    """

    def __init__(self, torch, chunk_bytes=None):
        self._torch = torch
        self._streams = {}
        self.chunk_bytes = _COPY_CHUNK_BYTES if chunk_bytes is None else int(chunk_bytes)

    def copy(self, tensors, hosts):
        torch = self._torch
        device = tensors[0].device
        if device.type != "cuda":
            for src, dst in zip(tensors, hosts):
                dst.copy_(src)
            return None
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = torch.cuda.Stream(device=device)
        computed = torch.cuda.current_stream(device).record_event()
        chunk = self.chunk_bytes
        held = [list(tensors), list(hosts)]

        def ready():
            stream.wait_event(computed)
            with torch.cuda.stream(stream):
                for src, dst in _pieces(held[0], held[1], chunk):
                    dst.copy_(src, non_blocking=True)
                    stream.synchronize()
            # landed: the device memory may go back to sglang's pool (on a failure
            # above it stays held, never freed under a copy still running)
            held[0] = held[1] = None

        return ready


def _pieces(tensors, hosts, chunk_bytes):
    """(source, destination) pairs of at most ``chunk_bytes`` each (at least one element)
    covering every element of each tensor once, in order."""
    for src, dst in zip(tensors, hosts):
        flat_src, flat_dst = src.reshape(-1), dst.view(-1)
        step = max(1, chunk_bytes // src.element_size())
        for lo in range(0, flat_src.numel(), step):
            yield flat_src[lo:lo + step], flat_dst[lo:lo + step]


class _StagingBuffer:
    """One reusable host buffer (pinned for CUDA) that a whole batch is copied into.

    Allocated once and grown only when a batch is larger than any before, so the
    forward path does not allocate pinned memory (cudaHostAlloc is slow) per pass.
    """

    def __init__(self, torch, nbytes=0, pinned=False):
        self._torch = torch
        self._buf = None
        self.pinned = pinned
        if nbytes:
            self._grow(nbytes)

    @property
    def nbytes(self):
        return 0 if self._buf is None else int(self._buf.numel())

    def _grow(self, nbytes):
        self._buf = None  # free the old one first: pinned memory is precious
        # device="cpu": sglang builds the model under a default CUDA device
        self._buf = self._torch.empty(nbytes, dtype=self._torch.uint8, device="cpu",
                                      pin_memory=self.pinned)

    def views(self, tensors):
        """Host tensors shaped like ``tensors``, carved out of this buffer."""
        offsets, total = _staging_layout(t.numel() * t.element_size() for t in tensors)
        if total > self.nbytes:
            self._grow(max(total, self.nbytes + self.nbytes // 4))
        out = []
        for t, offset in zip(tensors, offsets):
            size = t.numel() * t.element_size()
            out.append(self._buf[offset:offset + size].view(t.dtype).view(t.shape))
        return out


class _Job:
    """One captured batch on its way to disk."""

    __slots__ = ("requests", "hosts", "full_lens", "ready", "buffer", "remaining", "lock")

    def __init__(self, requests, hosts, full_lens, ready, buffer):
        self.requests = requests  # [(rid, prefix_len, seq_len, row_start, k)]
        self.hosts = hosts  # [ids, hidden, aux] host tensors
        self.full_lens = full_lens  # host tensor of orig_seq_lens, or None
        self.ready = ready  # waits until the device-to-host copies landed
        self.buffer = buffer
        self.remaining = 0
        self.lock = threading.Lock()

    def rows(self, lo, hi):
        """(ids, hidden, aux) of rows lo..hi, views into the staging buffer."""
        return tuple(t[lo:hi] for t in self.hosts)


class _Pending:
    """The chunks of a prompt that is prefilled over several passes (own memory)."""

    __slots__ = ("parts", "length", "nbytes", "last_seen")

    def __init__(self, now):
        self.parts = []
        self.length = 0
        self.nbytes = 0
        self.last_seen = now


def _owned(rows):
    """A copy of (ids, hidden, aux) that no longer refers to a staging buffer."""
    return tuple(t.clone() for t in rows)


def _nbytes(rows):
    return sum(t.numel() * t.element_size() for t in rows)


class HiddenStateCapture:
    """Splits captured batches into requests and writes one file per request."""

    def __init__(self, dump_dir, metadata=None, writer_threads=DEFAULT_WRITER_THREADS,
                 max_pending=None, rid_prefix="", crc32=False,
                 partial_timeout=DEFAULT_PARTIAL_TIMEOUT_S,
                 max_partial_bytes=int(DEFAULT_MAX_PARTIAL_GIB * (1 << 30)),
                 stop_timeout=DEFAULT_STOP_TIMEOUT_S, staging_bytes=0, clock=time.monotonic):
        import torch

        self._torch = torch
        self._clock = clock
        self.dump_dir = os.path.abspath(dump_dir)
        self.error_path = os.path.join(self.dump_dir, ERROR_FILE)
        self.stats_path = os.path.join(self.dump_dir, STATS_FILE)
        self.metadata = dict(metadata or {})
        self.rid_prefix = rid_prefix
        self.writer_threads = int(writer_threads)
        self.max_pending = int(max_pending or writer_threads)
        self.partial_timeout = float(partial_timeout)
        self.max_partial_bytes = int(max_partial_bytes)
        self.stop_timeout = float(stop_timeout)
        self.stats = {"batches": 0, "files": 0, "bytes": 0, "stall_s": 0.0,
                      "space_wait_s": 0.0}
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._seen_client_request = False  # after it, sglang's own rids are not the warm-up
        self._copier = _HostCopier(torch)
        # RLocks: the SIGTERM handler runs in the forward thread, maybe inside them
        self._stats_lock = threading.RLock()
        self._error_lock = threading.RLock()
        self._stats_file_lock = threading.RLock()
        self._failure = None
        self._error_fd = None
        self._error_len = 0
        self._stats_dirty = False
        self._stats_stop = threading.Event()
        self._stats_tmp = os.path.join(self.dump_dir, f".{STATS_FILE}.{os.getpid()}.next")
        self._stats_fd = None  # the reserved temporary file the next stats go into
        self._waiting_for_space = 0  # writers now waiting for space
        self._stopping_until = None  # deadline of a stop in progress
        self._pending = {}  # rid -> _Pending; the dispatcher thread's alone
        self._skipping = {}  # rid -> time: the rest of a prompt already counted incomplete
        self._pending_bytes = 0
        self._prepare_dir()
        self.removed_tmp = self._remove_dead_tmp_files()
        if not crc32:
            self._disable_crc32()
        pinned = bool(staging_bytes) and torch.cuda.is_available()
        # SimpleQueue: put() never blocks, even from a signal handler
        self._free_buffers = queue.SimpleQueue()
        for _slot in range(self.max_pending):
            self._free_buffers.put(_StagingBuffer(torch, staging_bytes if pinned else 0, pinned))
        self._idle = threading.Condition()
        self._in_flight = 0
        self._jobs = queue.SimpleQueue()
        self._pool = ThreadPoolExecutor(self.writer_threads, thread_name_prefix="eagle3-hs-writer")
        self._dispatcher = threading.Thread(
            target=self._dispatch_loop, name="eagle3-hs-dispatch", daemon=True
        )
        self._dispatcher.start()
        self._stats_thread = threading.Thread(
            target=self._stats_loop, name="eagle3-hs-stats", daemon=True
        )
        self._stats_thread.start()
        self._closed = False
        self._started = time.time()
        atexit.register(self.close)
        self._write_stats(force=True)
        logger.info(
            "hidden-state capture on: %s, layers %s (captured at %s), %d writer threads, "
            "%d batches in flight at most (%.0f MiB of %s staging memory each)%s",
            self.dump_dir, self.metadata.get("layer_ids"),
            self.metadata.get("captured_layers"), self.writer_threads, self.max_pending,
            staging_bytes / (1 << 20) if pinned else 0, "pinned" if pinned else "host",
            f"; removed {self.removed_tmp} *.tmp files of processes that are gone"
            if self.removed_tmp else "",
        )

    # -- set-up --------------------------------------------------------------

    def _prepare_dir(self):
        """Fail at start, naming the dir, if it cannot be written."""
        probe = os.path.join(self.dump_dir, f".capture-probe.{os.getpid()}.tmp")
        try:
            os.makedirs(self.dump_dir, exist_ok=True)
            with open(probe, "wb") as f:
                f.write(b"ok")
            os.unlink(probe)
            # Space for the error report, so that a full disk can still be reported.
            reserve = os.path.join(self.dump_dir, _ERROR_RESERVE)
            fd = os.open(reserve, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.posix_fallocate(fd, 0, _ERROR_RESERVE_BYTES)
            except OSError:
                os.close(fd)
                raise
            self._error_fd = fd
        except OSError as exc:
            msg = (
                f"hidden-state capture: {ENV_DUMP_DIR}={self.dump_dir} is not writable: "
                f"{exc.strerror or exc} (errno {exc.errno})"
            )
            logger.error(msg)
            raise HiddenStateCaptureError(msg) from exc

    def _remove_dead_tmp_files(self):
        """Remove the ``*.tmp`` files that processes now gone left half-written."""
        removed = 0
        for name in os.listdir(self.dump_dir):
            match = _TMP_NAME.fullmatch(name) or _OTHER_TMP_NAME.fullmatch(name)
            if match is None:
                continue
            pid = match.group("pid")
            if pid is not None and _process_alive(int(pid)):
                continue
            try:
                os.unlink(os.path.join(self.dump_dir, name))
                removed += 1
            except FileNotFoundError:
                pass
        return removed

    def _disable_crc32(self):
        # The zip CRC costs a third of the write speed and torch.load does not check it.
        try:
            from torch.utils.serialization import config

            config.save.compute_crc32 = False
        except (ImportError, AttributeError):  # torch < 2.6 has no switch
            pass

    def install_stop_handler(self):
        """On SIGTERM write what is held, then end as the process would have ended.

        Neither systemd's SIGTERM nor sglang's SIGKILL of its children runs
        ``atexit``. Only the main thread may set a handler; elsewhere this logs why
        a stop may lose the batches in flight.
        """
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum, frame):
            self.stop(self.stop_timeout, reason="SIGTERM")
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        try:
            signal.signal(signal.SIGTERM, on_sigterm)
        except ValueError:  # not the main thread
            logger.warning(
                "hidden-state capture: cannot handle SIGTERM outside the main thread; "
                "a stop may lose the batches in flight (the files are the acknowledgement)"
            )
            return False
        return True

    # -- forward thread --------------------------------------------------------

    def on_forward(self, forward_batch, input_ids, hidden_states, aux_hidden_states):
        """Called by the patched ``forward()`` after the model ran; never blocks on
        the GPU. Blocks only when ``max_pending`` batches are still being written."""
        mode = forward_batch.forward_mode
        if getattr(mode, "name", None) != "EXTEND":
            return
        if self._failure is not None:
            raise HiddenStateCaptureError(
                f"hidden-state capture stopped: {self._failure} (see {self.error_path})"
            )
        rids = forward_batch.rids
        if rids is None:
            raise HiddenStateCaptureError(
                "hidden-state capture: ForwardBatch.rids is not set (sglang older than "
                "0.5.14?): requests cannot be told apart"
            )
        prefix_lens = _host_list(
            forward_batch.extend_prefix_lens_cpu, forward_batch.extend_prefix_lens
        )
        chosen = []
        for k, rid in enumerate(rids):
            reason = skip_reason(rid, self.rid_prefix)
            if reason is None:
                chosen.append(k)
                self._seen_client_request = True
            elif prefix_lens[k] == 0:  # once a request, not once a chunk
                if reason == "health_check":
                    self._seen_client_request = True
                elif reason == "rid_rule" and not self._seen_client_request:
                    reason = "warmup"
                self._count_skip(reason, rid)
        if not chosen:
            return
        if input_ids is None:  # Kimi-K2.5's wrapper calls the language model with embeds
            input_ids = forward_batch.input_ids
        seq_lens = _host_list(forward_batch.extend_seq_lens_cpu, forward_batch.extend_seq_lens)
        aux = aux_hidden_states
        aux_own = isinstance(aux, (list, tuple))
        if aux_own:  # 0.5.14: K [T, H] tensors; one copy on the GPU
            aux = self._torch.cat(list(aux), dim=-1)
        total = sum(seq_lens)
        sizes = {int(t.shape[0]) for t in (input_ids, hidden_states, aux)}
        if len(seq_lens) != len(rids) or sizes != {total}:
            raise HiddenStateCaptureError(
                f"hidden-state capture: a batch of {len(rids)} requests and "
                f"{total} new tokens came with tensors of {sorted(sizes)} rows "
                "(padded or scattered batches, e.g. DP attention, are not supported)"
            )
        starts = [0]
        for n in seq_lens:
            starts.append(starts[-1] + n)
        tensors = [input_ids, hidden_states, aux]
        if input_ids.device.type == "cuda":
            # The copy runs while the forward stream goes on to the next pass (see
            # _HostCopier): snapshots, on the forward stream, of the tensors that are
            # sglang's, which a later pass may overwrite in place (a captured graph's
            # static buffers), so that what lands is this pass's.
            tensors = [input_ids.clone(), hidden_states.clone(), aux if aux_own else aux.clone()]
        full = getattr(forward_batch, "orig_seq_lens", None)
        if full is not None:
            # A snapshot on the forward stream: sglang may advance orig_seq_lens in
            # place (add_(1)) before the side-stream copy runs.
            tensors.append(full.clone())

        waited = time.perf_counter()
        buffer = self._free_buffers.get()  # backpressure: wait for a batch to be written
        self.stats["stall_s"] += time.perf_counter() - waited
        try:
            if buffer.nbytes == 0 and tensors[0].device.type == "cuda":
                buffer.pinned = True
            hosts = buffer.views(tensors)
            ready = self._copier.copy(tensors, hosts)
        except BaseException:
            self._free_buffers.put(buffer)
            raise
        requests = [(rids[k], prefix_lens[k], seq_lens[k], starts[k], k) for k in chosen]
        job = _Job(requests, hosts[:3], hosts[3] if full is not None else None, ready, buffer)
        with self._idle:
            self._in_flight += 1
        self.stats["batches"] += 1
        self._jobs.put(job)

    # -- dispatcher thread: in batch order, so chunks stitch in order ----------

    def _dispatch_loop(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, _GiveUp):
                self._give_up_partials(job.reason)
                if job.done is not None:
                    job.done.set()
                continue
            try:
                if job.ready is not None:
                    job.ready()
                writes = self._stitch(job)
            except BaseException as exc:  # never lose an error in a thread
                self._record_failure(None, f"capture dispatcher failed: {exc!r}")
                writes = []
            job.remaining = len(writes)
            if not writes:
                self._job_done(job)
                continue
            for rid, parts in writes:
                try:
                    self._pool.submit(self._write_one, job, rid, parts)
                except RuntimeError as exc:  # the pool is shut down (interpreter exit)
                    self._record_failure(rid, f"rid {rid!r} not written: {exc}")
                    self._part_done(job)
            self._write_stats()

    def _stitch(self, job):
        """Requests of the batch that are now complete: [(rid, [rows, ...])]."""
        now = self._clock()
        full_lens = job.full_lens.tolist() if job.full_lens is not None else None
        writes = []
        for rid, prefix, n, start, k in job.requests:
            full = int(full_lens[k]) if full_lens is not None else prefix + n
            last = prefix + n >= full
            rows = job.rows(start, start + n)
            pending = self._pending.get(rid)
            if prefix == 0:
                self._skipping.pop(rid, None)
                if pending is not None:
                    self._drop_pending(rid, f"started again at token 0; the {pending.length} "
                                            "tokens of its earlier attempt are dropped")
                    pending = None
            elif rid in self._skipping:
                self._skipping[rid] = now
                if last:
                    del self._skipping[rid]
                continue
            have = pending.length if pending is not None else 0
            if prefix != have:
                if pending is not None:
                    self._drop_pending(rid, None)
                self._count_skip("incomplete", rid, (
                    f"rid {rid!r}: this pass starts at token {prefix} but {have} tokens "
                    "of it were captured before (prefix cache on, or chunks run in "
                    "MIXED passes?); the request is not dumped"))
                if not last:
                    self._skipping[rid] = now
                continue
            if pending is None and last:
                writes.append((rid, [rows]))  # the common case: written from the buffer
                continue
            if pending is None:
                pending = self._pending[rid] = _Pending(now)
            if last:
                del self._pending[rid]
                self._pending_bytes -= pending.nbytes
                writes.append((rid, pending.parts + [rows]))
                continue
            owned = _owned(rows)  # the staging buffer is reused once this batch is out
            pending.parts.append(owned)
            pending.length += n
            pending.nbytes += _nbytes(owned)
            pending.last_seen = now
            self._pending_bytes += _nbytes(owned)
        self._expire_partials(now)
        return writes

    def _give_up_partials(self, reason):
        """Prompts whose last chunk can no longer come (a stop) are counted, not kept."""
        for rid, pending in sorted(self._pending.items()):
            self._drop_pending(rid, f"only {pending.length} tokens were prefilled before "
                                    f"{reason}; the request is not dumped")
        self._skipping.clear()

    def _drop_pending(self, rid, why):
        pending = self._pending.pop(rid)
        self._pending_bytes -= pending.nbytes
        if why is not None:
            self._count_skip("incomplete", rid, f"rid {rid!r}: {why}")

    def _expire_partials(self, now):
        """Bound the memory that prompts whose last chunk never comes can hold."""
        for rid, pending in sorted(self._pending.items(), key=lambda kv: kv[1].last_seen):
            if now - pending.last_seen > self.partial_timeout:
                self._drop_pending(rid, (
                    f"no chunk for {now - pending.last_seen:.0f} s after {pending.length} "
                    f"tokens (over {ENV_PARTIAL_TIMEOUT}={self.partial_timeout:g}); dropped"))
                self._skipping[rid] = now
            elif self._pending_bytes > self.max_partial_bytes:
                self._drop_pending(rid, (
                    f"{pending.length} tokens held while unfinished prompts take "
                    f"{self._pending_bytes + pending.nbytes} bytes (over "
                    f"{ENV_MAX_PARTIAL_GIB}); the oldest is dropped"))
                self._skipping[rid] = now
        for rid, seen in list(self._skipping.items()):
            if now - seen > self.partial_timeout:
                del self._skipping[rid]

    # -- writer threads ----------------------------------------------------------

    def _payload(self, rid, parts):
        if len(parts) == 1:  # written straight from the staging buffer, no copy
            ids, hidden, aux = (self._exact(t) for t in parts[0])
        else:
            ids, hidden, aux = (self._torch.cat([p[i] for p in parts]) for i in range(3))
        payload = {
            "input_ids": ids,
            "hidden_state": hidden.unsqueeze(0),
            "aux_hidden_state": aux.unsqueeze(0),
            "rid": rid,
        }
        payload.update(self.metadata)
        return payload, sum(t.numel() * t.element_size() for t in (ids, hidden, aux))

    def _exact(self, view):
        """``view`` over a storage of exactly its bytes (shared, not copied):
        torch.save writes a tensor's whole storage, and a view's is the buffer's."""
        start = view.storage_offset() * view.element_size()
        storage = view.untyped_storage()[start:start + view.numel() * view.element_size()]
        return self._torch.empty(0, dtype=view.dtype, device="cpu").set_(
            storage, 0, view.shape)

    def _write_one(self, job, rid, parts):
        path = os.path.join(self.dump_dir, file_name_for(rid))
        try:
            if os.path.lexists(path):
                self._count_skip("duplicate", rid, f"rid {rid!r}: {path} exists; kept, "
                                                   "this later capture is dropped")
                return
            payload, nbytes = self._payload(rid, parts)
            if self._write_file(path, payload, rid):
                with self._stats_lock:
                    self.stats["files"] += 1
                    self.stats["bytes"] += nbytes
        except BaseException as exc:  # never lose an error in a thread
            self._record_failure(rid, f"writing {path} failed: {exc!r}")
            self._count_skip("write_failed", rid)
        finally:
            self._part_done(job)
            self._write_stats()

    def _write_file(self, path, payload, rid):
        """Write through a temporary name; wait for space on ENOSPC. True if written."""
        waiting = _SpaceWait(self, path)
        try:
            while True:
                tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
                try:
                    with open(tmp, "wb") as f:
                        self._torch.save(payload, f)
                    return self._publish(tmp, path, rid)
                except OSError as exc:
                    _unlink_quietly(tmp)
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or self._stop_expired():
                        reason = f"{exc.strerror} (errno {exc.errno})"
                        # reported while the disk is still full: the error file's space
                        # is reserved
                        self._record_failure(rid, f"writing {path} failed: {reason}")
                        self._count_skip("write_failed", rid)
                        return False
                waiting.sleep()
        finally:
            waiting.end()

    def _publish(self, tmp, path, rid):
        """Give the finished file its name, never over an existing one."""
        try:
            try:
                os.link(tmp, path)
            except FileExistsError:
                self._count_skip("duplicate", rid, f"rid {rid!r}: {path} exists; kept, "
                                                   "this later capture is dropped")
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                # no hard links on this filesystem: check, then rename
                if os.path.lexists(path):
                    self._count_skip("duplicate", rid)
                    return False
                os.replace(tmp, path)
                return True
        finally:
            _unlink_quietly(tmp)
        return True

    def _part_done(self, job):
        with job.lock:
            job.remaining -= 1
            last = job.remaining <= 0
        if last:
            self._job_done(job)

    def _job_done(self, job):
        job.hosts = None
        self._free_buffers.put(job.buffer)
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()
        self._stats_dirty = True

    def _stop_expired(self):
        deadline = self._stopping_until
        return deadline is not None and self._clock() >= deadline

    # -- stats and errors ----------------------------------------------------------

    def _count_skip(self, reason, rid, detail=None):
        """Count a request that is not dumped; log each reason the first time."""
        with self._stats_lock:
            self.skipped[reason] += 1
            first = self.skipped[reason] == 1
        self._stats_dirty = True
        if first:
            logger.warning("hidden-state capture: not dumped: rid %r: %s (counted as %r in %s;"
                           " logged once)", rid, SKIP_REASONS[reason], reason, self.stats_path)
        if detail is not None:
            self._record_error(rid, detail)

    def stats_snapshot(self):
        with self._stats_lock:
            return {
                "pid": os.getpid(),
                "started": _iso(self._started),
                "updated": _iso(time.time()),
                "dump_dir": self.dump_dir,
                "layer_ids": self.metadata.get("layer_ids"),
                "captured_layers": self.metadata.get("captured_layers"),
                "dumped": self.stats["files"],
                "dumped_bytes": self.stats["bytes"],
                "batches": self.stats["batches"],
                "batches_in_flight": self._in_flight,
                "skipped": dict(self.skipped),
                "partials": len(self._pending),
                "partial_bytes": self._pending_bytes,
                "forward_wait_s": round(self.stats["stall_s"], 3),
                "waiting_for_space": self._waiting_for_space > 0,
                "space_wait_s": round(self.stats["space_wait_s"], 3),
                "failure": self._failure,
            }

    def _write_stats(self, force=False):
        """CAPTURE_STATS.json: now (``force``), or by the stats thread within a second.

        Written into a temporary file whose blocks were reserved beforehand, then
        renamed over the last one: a full dump dir, the moment the stats matter
        most, cannot keep them from being written, and a reader never sees half.
        """
        if not force:
            self._stats_dirty = True
            return
        self._stats_dirty = False
        data = json.dumps(self.stats_snapshot(), indent=1, sort_keys=True).encode()
        with self._stats_file_lock:  # one writer of the temporary file at a time
            try:
                if self._stats_fd is None:
                    self._stats_fd = self._reserve(self._stats_tmp, _STATS_RESERVE_BYTES)
                fd, self._stats_fd = self._stats_fd, None
                try:
                    os.pwrite(fd, data, 0)
                    os.ftruncate(fd, len(data))
                finally:
                    os.close(fd)
                os.replace(self._stats_tmp, self.stats_path)
                # blocks for the next one (the old file's, just freed, if nothing else)
                self._stats_fd = self._reserve(self._stats_tmp, _STATS_RESERVE_BYTES)
            except OSError as exc:  # a full disk before anything was reserved: next time
                logger.debug("hidden-state capture: cannot write %s: %s", self.stats_path, exc)

    def _stats_loop(self):
        while not self._stats_stop.wait(_STATS_INTERVAL_S):
            if self._stats_dirty:
                self._write_stats(force=True)

    @staticmethod
    def _reserve(path, nbytes):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except OSError:
            os.close(fd)
            _unlink_quietly(path)
            raise
        return fd

    def _record_failure(self, rid, message):
        with self._error_lock:
            if self._failure is None:
                self._failure = message
        self._record_error(rid, message)

    def _record_error(self, rid, message):
        """Log at ERROR and append to CAPTURE_ERROR.txt: never silent."""
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n"
        logger.error("hidden-state capture: %s", message)
        with self._error_lock:
            try:
                self._append_error(line.encode())
            except OSError as exc:
                logger.error(
                    "hidden-state capture: cannot write %s either: %s", self.error_path, exc
                )

    def _append_error(self, data):
        fd = self._error_fd
        if fd is not None and self._error_len + len(data) <= _ERROR_RESERVE_BYTES:
            # Written into the blocks reserved at start, so a full disk cannot stop it.
            first = self._error_len == 0
            os.pwrite(fd, data, self._error_len)
            self._error_len += len(data)
            if first:
                os.ftruncate(fd, self._error_len)
                os.replace(os.path.join(self.dump_dir, _ERROR_RESERVE), self.error_path)
            return
        with open(self.error_path, "ab") as f:
            f.write(data)

    # -- life cycle ----------------------------------------------------------------

    @property
    def failure(self):
        return self._failure

    @property
    def closed(self):
        return self._closed

    def flush(self, timeout=None):
        """Wait until every captured batch is written (or failed). True if idle."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def stop(self, timeout, reason="stop"):
        """Write what is held within ``timeout`` seconds; count what cannot finish."""
        self._stopping_until = self._clock() + timeout
        idle = self.flush(timeout)
        unfinished = self._in_flight
        # the dispatcher's own data: ask it, and wait briefly for the answer
        done = threading.Event()
        self._jobs.put(_GiveUp(reason, done))
        done.wait(max(1.0, min(5.0, timeout)))
        self._write_stats(force=True)
        if idle:
            logger.info("hidden-state capture: %s: every captured batch is written "
                        "(%d files in all)", reason, self.stats["files"])
        else:
            logger.error("hidden-state capture: %s: %d batches still unwritten after %.0f s",
                         reason, unfinished, timeout)
        return idle

    def close(self, timeout=60.0):
        """Flush, stop the threads, report prompts whose last chunk never came."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self.stop(timeout, reason="close")
        self._jobs.put(None)
        self._dispatcher.join(timeout)
        self._stats_stop.set()
        self._stats_thread.join(timeout)
        self._pool.shutdown(wait=True)
        with self._stats_file_lock:
            if self._stats_fd is not None:
                os.close(self._stats_fd)
                self._stats_fd = None
                _unlink_quietly(self._stats_tmp)
        if self._error_fd is not None:
            os.close(self._error_fd)
            self._error_fd = None
            if self._error_len == 0:
                _unlink_quietly(os.path.join(self.dump_dir, _ERROR_RESERVE))
        try:
            atexit.unregister(self.close)
        except Exception:
            pass


class _SpaceWait:
    """A writer waiting for space: backoff, a log line a minute, the stats' flag."""

    def __init__(self, capture, path):
        self._capture = capture
        self._path = path
        self._backoff = 0.05
        self._since = None
        self._logged = None

    def sleep(self):
        cap = self._capture
        now = cap._clock()
        if self._since is None:
            self._since = self._logged = now
            with cap._stats_lock:
                cap._waiting_for_space += 1
            logger.warning("hidden-state capture: %s is full; writers wait for space "
                           "(the forward waits once every buffer is taken)", cap.dump_dir)
        elif now - self._logged >= _SPACE_LOG_INTERVAL_S:
            self._logged = now
            logger.warning("hidden-state capture: %s full for %.0f s; %d batches waiting",
                           cap.dump_dir, now - self._since, cap._in_flight)
        time.sleep(self._backoff)
        with cap._stats_lock:
            cap.stats["space_wait_s"] += self._backoff
        self._backoff = min(self._backoff * 2, _SPACE_BACKOFF_MAX_S)

    def end(self):
        if self._since is not None:
            with self._capture._stats_lock:
                self._capture._waiting_for_space -= 1
            logger.info("hidden-state capture: %s has space again; %s written after %.0f s",
                        self._capture.dump_dir, os.path.basename(self._path),
                        self._capture._clock() - self._since)
            self._since = None


class _GiveUp:
    """A message to the dispatcher: count the unfinished prompts as incomplete."""

    def __init__(self, reason, done=None):
        self.reason = reason
        self.done = done


def _iso(timestamp):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def _process_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass
