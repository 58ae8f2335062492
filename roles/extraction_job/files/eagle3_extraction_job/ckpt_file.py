# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bytes of one ``.ckpt`` on their way to the disk: a file object for ``torch.save``.

It hashes what it writes (sha256, on a helper thread beside the write: both release
the GIL) and counts it; :meth:`CkptFile.sync` makes it durable (fsync, always). How
the bytes reach the disk is the write mode, each measured by
``benchmarks/drain_bench.py drain --variants`` (docs/benchmarks.md, issue 34):

  buffered  every write into the page cache; the disk sees the file at its fsync
  early     the same, in pieces of ``PIECE`` bytes, and each piece's writeback started
            as soon as it is in the cache (``sync_file_range(SYNC_FILE_RANGE_WRITE)``,
            which waits for nothing): the disk works while the rest is being written,
            and the fsync finds little left to do
  stream    ``early``, and the piece before is waited for and dropped from the page
            cache (``posix_fadvise(DONTNEED)``): at most two pieces a file are dirty
  direct    ``O_DIRECT`` from a page-aligned staging buffer of ``PIECE`` bytes (no page
            cache); the tail is padded to a block, written, and the file truncated to
            its size. Where the file system refuses ``O_DIRECT``, ``buffered``.

Durability is the same in every mode: the caller fsyncs (``sync``) before the file is
linked to its name. The temporary name is created with ``O_EXCL``: whatever is already
there (a file the job did not make, a link) is never written through.
"""
import concurrent.futures
import ctypes
import hashlib
import mmap
import os
import threading
import warnings

MODES = ("buffered", "early", "stream", "direct")
MODE = "early"          # the drain's mode (the fastest measured: docs/benchmarks.md)
PIECE = DEFAULT_PIECE = 16 << 20   # bytes a piece: the unit of writeback (early, stream) or of a write (direct)
# a write at least this long is hashed on a helper thread while it is written
PARALLEL_HASH_BYTES = 1 << 20
BLOCK = 4096            # O_DIRECT's alignment of offsets, lengths and buffers

# sync_file_range(2)'s flags (Python's os module has no sync_file_range)
WAIT_BEFORE, WRITE, WAIT_AFTER = 1, 2, 4

_hash_pool = None
_hash_pool_lock = threading.Lock()
_staging = threading.local()   # direct: one aligned buffer a drain thread, kept


def helper_pool():
    """The threads that hash beside the writes (and check beside them: drain.py)."""
    global _hash_pool  # pylint: disable=global-statement
    with _hash_pool_lock:
        if _hash_pool is None:
            _hash_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(32, os.cpu_count() or 4), thread_name_prefix="drain-hash")
        return _hash_pool


_libc = ctypes.CDLL(None, use_errno=True)
_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]


def sync_file_range(fd, offset, nbytes, flags):
    """sync_file_range(2), through libc (ctypes lets go of the GIL for the call)."""
    if _libc.sync_file_range(fd, offset, nbytes, flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _write_all(fd, view):
    """``os.write`` until every byte of ``view`` is written (a write may be short)."""
    while len(view):
        view = view[os.write(fd, view):]


class CkptFile:
    """A new file at ``path`` (created, never replaced) written in ``mode``.

    Use as a context manager; ``torch.save(payload, f)``, then ``f.sync()``. ``size``
    and ``sha256`` describe exactly the bytes written."""

    def __init__(self, path, mode=None, torch=None):
        self.mode = mode or MODE
        if self.mode not in MODES:
            raise ValueError(f"write mode {self.mode!r} is not one of {', '.join(MODES)}")
        self.path = path
        self.size = 0
        self.sha256 = hashlib.sha256()
        self._torch = torch
        self._small = bytearray()   # small writes (headers) gathered into one
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        self._fd = None
        if self.mode == "direct":
            try:
                self._fd = os.open(path, flags | os.O_DIRECT, 0o644)
            except OSError:   # tmpfs and some others refuse O_DIRECT
                self.mode = "buffered"
            else:
                self._buf, self._buf_tensor = _staging_buffer(torch)
                self._fill = 0
        if self._fd is None:
            self._fd = os.open(path, flags, 0o644)
        self._written = 0   # bytes handed to the kernel (size: bytes taken from torch.save)
        self._started = 0   # early/stream: bytes whose writeback was started
        self._dropped = 0   # stream: bytes written back and dropped from the cache

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def fileno(self):
        return self._fd

    # -- what torch.save calls ---------------------------------------------------

    def write(self, data):
        view = memoryview(data).cast("B")
        n = len(view)
        if self.mode == "direct":
            self._write_direct(view)
        elif n < PARALLEL_HASH_BYTES:
            self._hash(view)
            self._small += view
        else:
            self._flush_small()
            # torch.save hands over a view of its buffer, valid only during this call:
            # the hash is waited for before returning (updates stay in file order)
            hashed = helper_pool().submit(self._hash, view)
            try:
                for start in range(0, n, PIECE):
                    self._write_piece(view[start:start + PIECE])
            finally:
                hashed.result()
        self.size += n
        return n

    def flush(self):
        if self.mode != "direct":
            self._flush_small()

    def sync(self):
        """Every byte and the file's size on the disk (fsync); the direct mode's tail first."""
        if self.mode == "direct":
            self._finish_direct()
        else:
            self._flush_small()
        os.fsync(self._fd)

    # -- the steps (separate methods: the drain bench times each) -----------------

    def _hash(self, view):
        self.sha256.update(view)

    def _flush_small(self):
        if self._small:
            _write_all(self._fd, memoryview(self._small))
            self._written += len(self._small)
            self._small = bytearray()

    def _write_piece(self, piece):
        _write_all(self._fd, piece)
        self._written += len(piece)
        if self.mode in ("early", "stream"):
            self._start_writeback()

    def _start_writeback(self):
        """Start the writeback of what was written since the last call; in ``stream`` mode
        also wait for the piece before and drop it from the page cache.

        Only a head start: where the file system refuses it, the rest of the file goes
        ``buffered`` (the fsync makes it durable all the same)."""
        try:
            sync_file_range(self._fd, self._started, self._written - self._started, WRITE)
        except OSError:
            self.mode = "buffered"
            return
        if self.mode == "stream" and self._started > self._dropped:
            sync_file_range(self._fd, self._dropped, self._started - self._dropped,
                            WAIT_BEFORE | WRITE | WAIT_AFTER)
            os.posix_fadvise(self._fd, self._dropped, self._started - self._dropped,
                             os.POSIX_FADV_DONTNEED)
            self._dropped = self._started
        self._started = self._written

    def _write_direct(self, view):
        while len(view):
            take = min(len(view), PIECE - self._fill)
            chunk = view[:take]
            if take >= PARALLEL_HASH_BYTES:
                # the copy into the staging buffer runs in torch (no GIL held), the hash
                # beside it on a helper thread
                hashed = helper_pool().submit(self._hash, chunk)
                try:
                    self._copy_in(chunk)
                finally:
                    hashed.result()
            else:
                self._hash(chunk)
                self._buf[self._fill:self._fill + take] = chunk
            self._fill += take
            view = view[take:]
            if self._fill == PIECE:
                self._write_staged(PIECE)

    def _copy_in(self, chunk):
        src = self._torch.frombuffer(chunk, dtype=self._torch.uint8)
        self._buf_tensor[self._fill:self._fill + len(chunk)].copy_(src)

    def _write_staged(self, length):
        _write_all(self._fd, memoryview(self._buf)[:length])
        self._written += length
        self._fill = 0

    def _finish_direct(self):
        if self._fill:
            padded = -(-self._fill // BLOCK) * BLOCK
            self._buf[self._fill:padded] = bytes(padded - self._fill)
            self._write_staged(padded)
            os.ftruncate(self._fd, self.size)


def _staging_buffer(torch):
    """This thread's page-aligned staging buffer (mmap) and a uint8 tensor over it."""
    _quiet_read_only_warning(torch)
    if getattr(_staging, "size", 0) != PIECE:
        _staging.buf = mmap.mmap(-1, PIECE)
        _staging.tensor = torch.frombuffer(_staging.buf, dtype=torch.uint8)
        _staging.size = PIECE
    return _staging.buf, _staging.tensor


_quiet_lock = threading.Lock()
_quiet = []


def _quiet_read_only_warning(torch):
    """torch warns once a process that a tensor over a read-only buffer could be written
    to; the direct mode only reads such tensors (torch.save's own buffers). The one
    warning is raised here, once, under a filter (``catch_warnings`` is not thread-safe:
    never around each copy)."""
    with _quiet_lock:
        if not _quiet:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                torch.frombuffer(memoryview(b"\0").toreadonly(), dtype=torch.uint8)
            _quiet.append(True)
