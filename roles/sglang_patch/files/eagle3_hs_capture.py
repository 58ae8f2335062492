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
* only ``forward_mode == ForwardMode.EXTEND`` passes are captured (decode, MIXED,
  TARGET_VERIFY and the other ``is_extend()`` modes are left alone);
* health checks (rid ``HEALTH_CHECK_*``) and requests without a client-supplied rid
  (sglang's own uuid4 hex rids: the start-up warm-up) are never dumped;
* the flat batch is split into requests with ``rids`` / ``extend_seq_lens_cpu`` /
  ``extend_prefix_lens_cpu``; chunks of a prompt prefilled over several passes are
  stitched by rid and prefix length, and a request is complete when its prefix plus
  its chunk reach ``orig_seq_lens`` (the prompt's length);
* the tensors go device-to-host into pinned memory on a side stream, a dispatcher
  thread splits and stitches, writer threads ``torch.save`` one file per request as
  ``<rid>.pt.<tag>.tmp`` and rename it to ``<rid>.pt``; at most
  ``SGLANG_HS_MAX_PENDING`` batches are in flight, beyond that the forward blocks
  (backpressure: nothing is dropped);
* a failed write (ENOSPC, a read-only or vanished dir) is logged at ERROR, written
  to ``CAPTURE_ERROR.txt`` in the dump dir (space for it is reserved at start), and
  the next captured pass raises :class:`HiddenStateCaptureError`: a capture server
  that cannot write must not go on answering as if it could.

File format (``torch.load(path, weights_only=True)``, SpecForge's keys):
``input_ids[T]``, ``hidden_state[1,T,H]`` (after the final norm),
``aux_hidden_state[1,T,K*H]`` (the K captured layers, concatenated), ``rid``,
``layer_ids``, ``captured_layers``, ``sglang_version``, ``model``, ``format_version``.

Only the standard library is imported at module import; torch is imported when a
capture is actually set up.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import re
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

# SpecForge's draft config for Kimi-K2 / DeepSeek-V3 (61 layers); sglang captures
# them at [2, 30, 58] (its +1 quirk when the first id is 1).
DEFAULT_LAYER_IDS = (1, 29, 57)
DEFAULT_WRITER_THREADS = 4
FORMAT_VERSION = 1
FILE_SUFFIX = ".pt"
ERROR_FILE = "CAPTURE_ERROR.txt"
_ERROR_RESERVE = ".capture-error.reserve"
_ERROR_RESERVE_BYTES = 64 * 1024
HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"
# sglang gives a request without a client rid uuid.uuid4().hex (io_struct.py):
# the start-up warm-up is one of those.
_AUTO_RID = re.compile(r"[0-9a-f]{32}")


_INSTANCE = None  # the process's capture, once install() made one


class HiddenStateCaptureError(RuntimeError):
    """The capture cannot go on (unwritable dump dir, failed write, bad settings)."""


def _env_int(environ, name, default, minimum=1):
    raw = environ.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise HiddenStateCaptureError(
            f"{name}={raw!r}: expected an integer >= {minimum}"
        )
    return value


def parse_layer_ids(raw):
    """``"1,29,57"`` -> ``(1, 29, 57)``; raises naming the variable on bad input."""
    if raw is None or raw.strip() == "":
        return DEFAULT_LAYER_IDS
    try:
        ids = tuple(int(part) for part in raw.split(","))
    except ValueError:
        ids = ()
    if not ids or any(i < 0 for i in ids):
        raise HiddenStateCaptureError(
            f"{ENV_LAYER_IDS}={raw!r}: expected comma-separated layer ids >= 0, "
            "e.g. '1,29,57'"
        )
    return ids


def wanted_rid(rid, prefix=""):
    """Whether a request is dumped: not a health check, not sglang's own uuid rid."""
    if not isinstance(rid, str) or not rid:
        return False
    if rid.startswith(HEALTH_CHECK_RID_PREFIX) or _AUTO_RID.fullmatch(rid):
        return False
    return rid.startswith(prefix)


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


def install(model, tp_rank=None, environ=None):
    """Set up the capture for ``model`` (a ``DeepseekV2ForCausalLM``).

    Returns a :class:`HiddenStateCapture`, or ``None`` when ``SGLANG_HS_DUMP_DIR``
    is unset, on TP ranks other than 0, and on pipeline stages other than the last.
    Raises :class:`HiddenStateCaptureError` on bad settings or an unwritable dir, so
    that the server fails at start rather than serving without dumping.
    """
    environ = os.environ if environ is None else environ
    dump_dir = environ.get(ENV_DUMP_DIR, "")
    if not dump_dir:
        return None
    layer_ids = parse_layer_ids(environ.get(ENV_LAYER_IDS))
    writer_threads = _env_int(environ, ENV_WRITER_THREADS, DEFAULT_WRITER_THREADS)
    max_pending = _env_int(environ, ENV_MAX_PENDING, writer_threads)
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
    _INSTANCE = HiddenStateCapture(
        dump_dir,
        metadata=metadata,
        writer_threads=writer_threads,
        max_pending=max_pending,
        rid_prefix=environ.get(ENV_RID_PREFIX, ""),
        crc32=environ.get(ENV_CRC32, "0") not in ("", "0", "false", "False"),
    )
    return _INSTANCE


def _host_list(cpu_list, tensor):
    if cpu_list is not None:
        return [int(x) for x in cpu_list]
    if tensor is not None:  # sglang's gpu-only path leaves the *_cpu mirrors unset
        return [int(x) for x in tensor.tolist()]
    return None


class _Job:
    """One captured batch on its way to disk."""

    __slots__ = ("requests", "full_lens", "ready", "remaining", "lock")

    def __init__(self, requests, full_lens, ready):
        self.requests = requests  # [(rid, prefix_len, seq_len, [ids, hidden, aux], k)]
        self.full_lens = full_lens  # host tensor of orig_seq_lens, or None
        self.ready = ready  # waits until the device-to-host copies landed
        self.remaining = 0
        self.lock = threading.Lock()


class _Pending:
    """The chunks of a prompt that is prefilled over several passes."""

    __slots__ = ("parts", "length")

    def __init__(self):
        self.parts = []
        self.length = 0


class _HostCopier:
    """Copies device tensors to host memory without stalling the forward stream.

    CUDA: into pinned memory on a side stream that waits for the forward stream;
    the tensors are marked as used by that stream so their memory is not reused
    before the copy ran. CPU (tests): a plain clone.
    """

    def __init__(self, torch):
        self._torch = torch
        self._streams = {}

    def copy(self, tensors):
        torch = self._torch
        device = tensors[0].device
        if device.type != "cuda":
            return [t.clone() for t in tensors], None
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = torch.cuda.Stream(device=device)
        stream.wait_stream(torch.cuda.current_stream(device))
        hosts = []
        with torch.cuda.stream(stream):
            for t in tensors:
                host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                host.copy_(t, non_blocking=True)
                t.record_stream(stream)
                hosts.append(host)
            event = torch.cuda.Event()
            event.record(stream)
        return hosts, event.synchronize


class HiddenStateCapture:
    """Splits captured batches into requests and writes one file per request."""

    def __init__(self, dump_dir, metadata=None, writer_threads=DEFAULT_WRITER_THREADS,
                 max_pending=None, rid_prefix="", crc32=False):
        import torch

        self._torch = torch
        self.dump_dir = os.path.abspath(dump_dir)
        self.error_path = os.path.join(self.dump_dir, ERROR_FILE)
        self.metadata = dict(metadata or {})
        self.rid_prefix = rid_prefix
        self.writer_threads = int(writer_threads)
        self.max_pending = int(max_pending or writer_threads)
        self.stats = {"batches": 0, "files": 0, "bytes": 0, "stall_s": 0.0}
        self._copier = _HostCopier(torch)
        self._error_lock = threading.Lock()
        self._failure = None
        self._error_fd = None
        self._error_len = 0
        self._reported = set()  # rids whose chunks are dropped after an error
        self._pending = {}  # rid -> _Pending; the dispatcher thread's alone
        self._prepare_dir()
        if not crc32:
            self._disable_crc32()
        self._slots = threading.Semaphore(self.max_pending)
        self._idle = threading.Condition()
        self._in_flight = 0
        self._jobs = queue.SimpleQueue()
        self._pool = ThreadPoolExecutor(self.writer_threads, thread_name_prefix="eagle3-hs-writer")
        self._dispatcher = threading.Thread(
            target=self._dispatch_loop, name="eagle3-hs-dispatch", daemon=True
        )
        self._dispatcher.start()
        self._closed = False
        atexit.register(self.close)
        logger.info(
            "hidden-state capture on: %s, layers %s (captured at %s), %d writer threads, "
            "%d batches in flight at most",
            self.dump_dir, self.metadata.get("layer_ids"),
            self.metadata.get("captured_layers"), self.writer_threads, self.max_pending,
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

    def _disable_crc32(self):
        # The zip CRC costs a third of the write speed and torch.load does not check it.
        try:
            from torch.utils.serialization import config

            config.save.compute_crc32 = False
        except (ImportError, AttributeError):  # torch < 2.6 has no switch
            pass

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
        chosen = [k for k, rid in enumerate(rids) if wanted_rid(rid, self.rid_prefix)]
        if not chosen:
            return
        seq_lens = _host_list(forward_batch.extend_seq_lens_cpu, forward_batch.extend_seq_lens)
        prefix_lens = _host_list(
            forward_batch.extend_prefix_lens_cpu, forward_batch.extend_prefix_lens
        )
        if isinstance(aux_hidden_states, (list, tuple)):
            aux_hidden_states = self._torch.cat(list(aux_hidden_states), dim=-1)
        total = sum(seq_lens)
        sizes = {int(t.shape[0]) for t in (input_ids, hidden_states, aux_hidden_states)}
        if len(seq_lens) != len(rids) or sizes != {total}:
            raise HiddenStateCaptureError(
                f"hidden-state capture: a batch of {len(rids)} requests and "
                f"{total} new tokens came with tensors of {sorted(sizes)} rows "
                "(padded or scattered batches, e.g. DP attention, are not supported)"
            )
        starts = [0]
        for n in seq_lens:
            starts.append(starts[-1] + n)
        tensors = []
        for k in chosen:
            lo, hi = starts[k], starts[k + 1]
            tensors += [input_ids[lo:hi], hidden_states[lo:hi], aux_hidden_states[lo:hi]]
        full = getattr(forward_batch, "orig_seq_lens", None)
        if full is not None:
            tensors.append(full)

        waited = time.perf_counter()
        self._slots.acquire()  # backpressure: wait for a batch to be written
        self.stats["stall_s"] += time.perf_counter() - waited
        try:
            hosts, ready = self._copier.copy(tensors)
        except BaseException:
            self._slots.release()
            raise
        # k: the request's index in the batch, to read its orig_seq_lens entry
        requests = [
            (rids[k], prefix_lens[k], seq_lens[k], hosts[3 * j: 3 * j + 3], k)
            for j, k in enumerate(chosen)
        ]
        job = _Job(requests, hosts[-1] if full is not None else None, ready)
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
            try:
                if job.ready is not None:
                    job.ready()
                writes = self._stitch(job)
            except BaseException as exc:  # never lose an error in a thread
                self._record_failure(None, f"capture dispatcher failed: {exc!r}")
                writes = []
            job.remaining = len(writes)
            if not writes:
                self._job_done()
                continue
            for rid, parts in writes:
                try:
                    self._pool.submit(self._write_one, job, rid, parts)
                except RuntimeError as exc:  # the pool is shut down (interpreter exit)
                    self._record_failure(rid, f"rid {rid!r} not written: {exc}")
                    with job.lock:
                        job.remaining -= 1
                        last = job.remaining == 0
                    if last:
                        self._job_done()

    def _stitch(self, job):
        full_lens = job.full_lens.tolist() if job.full_lens is not None else None
        writes = []
        for rid, prefix, n, parts, k in job.requests:
            full = int(full_lens[k]) if full_lens is not None else prefix + n
            pending = self._pending.pop(rid, None)
            have = pending.length if pending is not None else 0
            if prefix != have:
                if rid not in self._reported:
                    self._reported.add(rid)
                    self._record_error(
                        rid,
                        f"rid {rid!r}: this pass starts at token {prefix} but {have} tokens "
                        "of it were captured before (prefix cache on, or chunks run in "
                        "MIXED passes?); the request is not dumped",
                    )
                if prefix + n >= full:
                    self._reported.discard(rid)
                continue
            pending = pending or _Pending()
            pending.parts.append(parts)
            pending.length += n
            if prefix + n >= full:
                writes.append((rid, pending.parts))
            else:
                self._pending[rid] = pending
        return writes

    # -- writer threads ----------------------------------------------------------

    def _write_one(self, job, rid, parts):
        torch = self._torch
        path = os.path.join(self.dump_dir, file_name_for(rid))
        tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            if len(parts) == 1:
                ids, hidden, aux = parts[0]
            else:
                ids, hidden, aux = (torch.cat([p[i] for p in parts]) for i in range(3))
            payload = {
                "input_ids": ids,
                "hidden_state": hidden.unsqueeze(0),
                "aux_hidden_state": aux.unsqueeze(0),
                "rid": rid,
            }
            payload.update(self.metadata)
            with open(tmp, "wb") as f:
                torch.save(payload, f)
            os.replace(tmp, path)
            nbytes = sum(t.numel() * t.element_size() for t in (ids, hidden, aux))
            with self._error_lock:
                self.stats["files"] += 1
                self.stats["bytes"] += nbytes
        except BaseException as exc:
            reason = f"{exc.strerror} (errno {exc.errno})" if isinstance(exc, OSError) else repr(exc)
            # reported while the disk is still full: the error file's space is reserved
            self._record_failure(rid, f"writing {path} failed: {reason}")
            try:
                os.unlink(tmp)
            except OSError:
                pass
        finally:
            with job.lock:
                job.remaining -= 1
                last = job.remaining == 0
            if last:
                self._job_done()

    def _job_done(self):
        self._slots.release()
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    # -- errors ------------------------------------------------------------------

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

    def close(self, timeout=60.0):
        """Flush, stop the threads, report prompts whose last chunk never came."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        if not self.flush(timeout):
            logger.error("hidden-state capture: %d batches still unwritten at close", self._in_flight)
        self._jobs.put(None)
        self._dispatcher.join(timeout)
        self._pool.shutdown(wait=True)
        for rid, pending in sorted(self._pending.items()):
            self._record_error(
                rid, f"rid {rid!r}: only {pending.length} tokens were prefilled before close; "
                "the request is not dumped",
            )
        self._pending.clear()
        if self._error_fd is not None:
            os.close(self._error_fd)
            self._error_fd = None
            if self._error_len == 0:
                try:
                    os.unlink(os.path.join(self.dump_dir, _ERROR_RESERVE))
                except OSError:
                    pass
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
