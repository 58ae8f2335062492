# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One dump in ``/dev/shm`` -> one durable SpecForge ``.ckpt``, recorded, then the dump removed.

The order is the whole point: check the dump against the sample, reserve a file
index in the manifest, write the ``.ckpt`` under a temporary name, fsync it, link it
to its final name (``link`` fails rather than replace a finished file), fsync the
directory, mark the row ``done``, and only then delete the dump. A crash anywhere
leaves either the dump or a done file, never neither.

Several drain threads share the manifest's group commit: the reservation and the
``done`` row of many samples go into one transaction, and the directory fsync is
done once for the group, just before that transaction commits (see
``manifest.Manifest.commit_grouped``). A sample's own thread still waits for the
commit holding its row before it deletes the dump.
"""
import glob
import os
import re
import shutil
import threading
import time

from eagle3_extraction_job import ckpt_file, names
from eagle3_extraction_job.manifest import fsync_dir, makedirs_durable

# the dump stays in tmpfs pages, not copied into the process: the drain needs little RAM
MMAP = True
# the checks of the values (NaN/Inf, a bit test of every value: ~100 ms of a drain thread a
# 117 MB sample; not degenerate, one min/max a layer: about a third of that more) on a helper
# thread while the file is written, the link waiting for it (a rejected dump gets no name and
# no row). On since issue 34: 0.936 of the disk against 0.816 before it,
# same run (docs/benchmarks.md); `early` without `+beside` in the benches turns it off
CHECK_BESIDE_WRITE = True
SPECFORGE_KEYS = ("input_ids", "loss_mask", "hidden_state", "aux_hidden_state")


class DumpRejected(ValueError):
    """A dump does not match its sample (or is unreadable)."""


# a rejected dump's failure, as the manifest keeps it: a later run tells a rejection from other failures by it
REJECTION_RE = re.compile(r"dump .+ rejected: .+", re.S)


def rejection(dump_path, exc):
    """The failure recorded for a sample whose dump was rejected (REJECTION_RE matches it)."""
    return f"dump {dump_path} rejected: {exc}"


BF16_EXPONENT = 0x7F80


def all_finite_bf16(torch, t):
    """No NaN or Inf in a bf16 tensor: no value has all 8 exponent bits set.

    Bit arithmetic on the int16 view, about 5x faster than ``torch.isfinite`` on bf16
    on CPU (which widens every value): the drain's check must keep up with the disk.
    """
    if t.numel() == 0:
        return True
    return int(torch.bitwise_and(t.view(torch.int16), BF16_EXPONENT).max()) != BF16_EXPONENT


def set_write_variant(variant):
    """The drain's way of writing, for the benchmarks that compare them in one run:
    ``MODE[:MiB][+beside]``: a write mode of ``ckpt_file``, its piece size in MiB, and
    ``+beside`` for the NaN/Inf check beside the write (``CHECK_BESIDE_WRITE``). Applies
    to every ``Drainer`` made after the call."""
    global CHECK_BESIDE_WRITE  # pylint: disable=global-statement
    match = re.fullmatch(r"(%s)(?::([1-9][0-9]{0,3}))?(\+beside)?" % "|".join(ckpt_file.MODES),
                         variant)
    if not match:
        raise ValueError(f"write variant {variant!r} is not MODE[:MiB][+beside] with MODE one "
                         f"of {', '.join(ckpt_file.MODES)}")
    mode, mib, beside = match.groups()
    ckpt_file.MODE = mode
    ckpt_file.PIECE = (int(mib) << 20) if mib else ckpt_file.DEFAULT_PIECE
    CHECK_BESIDE_WRITE = bool(beside)


def check_finite(torch, dump):
    """Raise :class:`DumpRejected` if a hidden state holds NaN or Inf."""
    for key in ("hidden_state", "aux_hidden_state"):
        if not all_finite_bf16(torch, dump[key]):
            raise DumpRejected(f"{key} holds NaN or Inf")


# a bf16 zero's bits, either sign: a tensor whose values are all these is all zero
BF16_NEGATIVE_ZERO = -0x8000
BF16_MAGNITUDE = 0x7FFF


def degenerate_bf16(torch, t):
    """Why a bf16 tensor holds nothing (all zero, or one value throughout), or ``""``.

    One ``aminmax`` of the int16 view (bits, so +0 and -0 are two values: a mix of the two
    is caught by the second, rare, test): a fraction of the NaN/Inf check's cost."""
    if t.numel() == 0:
        return ""
    bits = t.view(torch.int16)
    low, high = (int(x) for x in torch.aminmax(bits))
    if low == high:
        value = t.reshape(-1)[0].item()
        return "all zero" if value == 0 else f"every value is {value!r}"
    if (low, high) == (BF16_NEGATIVE_ZERO, 0) and int(
            torch.bitwise_and(bits, BF16_MAGNITUDE).max()) == 0:
        return "all zero"
    return ""


def check_not_degenerate(torch, dump):
    """Raise :class:`DumpRejected` if the hidden state or one captured layer is degenerate.

    A capture that wrote nothing (zeros: vLLM's all-zero hidden states, speculators #613) or
    one value looks like a sample and trains nothing. Each layer of the aux is checked on
    its own: one layer left unwritten is the capture's likelier fault than all of them."""
    hidden, aux = dump["hidden_state"], dump["aux_hidden_state"]
    why = degenerate_bf16(torch, hidden)
    if why:
        raise DumpRejected(f"degenerate hidden_state: {why}")
    width = hidden.shape[-1]
    layers = aux.shape[-1] // width if width else 0
    captured = dump.get("captured_layers")
    for k in range(layers):
        why = degenerate_bf16(torch, aux[..., k * width:(k + 1) * width])
        if why:
            named = (f" (captured layer {captured[k]})" if isinstance(captured, list)
                     and len(captured) == layers else "")
            raise DumpRejected(f"degenerate aux_hidden_state: layer {k + 1} of {layers}"
                               f"{named}: {why}")


def check_values(torch, dump):
    """The values' checks, for the drain and the online gateway alike: finite, not degenerate."""
    check_finite(torch, dump)
    check_not_degenerate(torch, dump)


def check_dump(torch, dump, sample, hidden_size=0, captured_layers=0, finite=True):
    """Raise :class:`DumpRejected` unless ``dump`` is this sample's hidden states
    (``finite=False``: all but the checks of the values, :func:`check_values`)."""
    if not isinstance(dump, dict):
        raise DumpRejected("not a dict")
    for key in ("input_ids", "hidden_state", "aux_hidden_state"):
        if not isinstance(dump.get(key), torch.Tensor):
            raise DumpRejected(f"{key} missing or not a tensor")
    ids, hidden, aux = dump["input_ids"], dump["hidden_state"], dump["aux_hidden_state"]
    tokens = len(sample.input_ids)
    if ids.dtype != torch.int64 or ids.dim() != 1:
        raise DumpRejected(f"input_ids is {ids.dtype} {list(ids.shape)}, expected int64 [T]")
    if ids.numel() != tokens:
        raise DumpRejected(f"input_ids has {ids.numel()} tokens, the sample {tokens}")
    expected = torch.frombuffer(sample.input_ids, dtype=torch.int64)
    if not torch.equal(ids, expected):
        first = int((ids != expected).nonzero()[0, 0])
        raise DumpRejected(f"input_ids differ from the sample's from token {first} on")
    for key, t in (("hidden_state", hidden), ("aux_hidden_state", aux)):
        if t.dtype != torch.bfloat16:
            raise DumpRejected(f"{key} is {t.dtype}, expected bfloat16")
        if t.dim() != 3 or t.shape[0] != 1 or t.shape[1] != tokens:
            raise DumpRejected(f"{key} has shape {list(t.shape)}, expected [1, {tokens}, ...]")
    width = hidden.shape[2]
    if hidden_size and width != hidden_size:
        raise DumpRejected(f"hidden_state width {width}, the model's hidden size {hidden_size}")
    if width == 0 or aux.shape[2] % width:
        raise DumpRejected(f"aux_hidden_state width {aux.shape[2]} is not a multiple of {width}")
    if captured_layers and aux.shape[2] != captured_layers * width:
        raise DumpRejected(f"aux_hidden_state width {aux.shape[2]}, expected "
                           f"{captured_layers} x {width}")
    if finite:
        check_values(torch, dump)


def disable_zip_crc32(torch):
    """torch.save's zip CRC is left out: it would protect nothing and costs a third of a save.

    torch.load never checks it, mmap or not (torch 2.13: a flipped byte of a file saved
    with the CRC loads without a word; tests/job/test_drain.py pins it), so SpecForge's
    loader would not see damage with it either. Measured on a 4096-token sample (H 7168,
    bf16, CPU): torch.save 1.7 GB/s with the CRC, 2.6 GB/s without. What protects the read
    is the sha256 of every byte in the manifest, which ``playbooks/verify.yml`` checks and
    ``playbooks/repair.yml`` acts on (the damaged file moved aside, its sample redone).
    (The capture leaves it out too.)"""
    try:
        from torch.utils.serialization import config  # pylint: disable=import-outside-toplevel
        config.save.compute_crc32 = False
    except (ImportError, AttributeError):  # torch < 2.6 has no switch
        pass


def load_dump(torch, path):
    """A dump as the capture wrote it (mmap'ed: its tensors stay in the tmpfs pages);
    raises :class:`DumpRejected` when it cannot be loaded."""
    try:
        return torch.load(path, weights_only=True, mmap=MMAP, map_location="cpu")
    except Exception as exc:  # pylint: disable=broad-except
        raise DumpRejected(f"cannot be loaded: {exc!r}") from exc


class Drainer:
    """Drains dumps for one output directory; safe to call from several threads."""

    def __init__(self, torch, manifest, output_dir, hidden_size=0, captured_layers=0):
        self.torch = torch
        self.manifest = manifest
        self.output_dir = output_dir
        self.hidden_size = hidden_size
        self.captured_layers = captured_layers
        self.rejected_dir = os.path.join(output_dir, "rejected")
        self._provenance = None  # (layer_ids, captured_layers, sglang_version, model)
        self._durable_dirs = set()
        self._dirs_lock = threading.Lock()
        self.check_beside_write = CHECK_BESIDE_WRITE
        disable_zip_crc32(torch)
        # the drain's parallelism is its threads: each one's tensor ops (the checks) run
        # on one core. torch's default, a team of one thread a core for every calling
        # thread, put 16 x 16 threads on 16 cores and cost the drain 14 points of a copy's
        # speed at 16 drain threads (docs/benchmarks.md). The job uses torch for nothing else.
        torch.set_num_threads(1)

    def load(self, path):
        return load_dump(self.torch, path)

    def _check_provenance(self, dump):
        seen = tuple(str(dump.get(k, "")) for k in
                     ("layer_ids", "captured_layers", "sglang_version", "model"))
        if self._provenance is None:
            self.manifest.pin(layer_ids=seen[0], captured_layers=seen[1],
                              sglang_version=seen[2], model_class=seen[3])
            self._provenance = seen
        elif seen != self._provenance:
            raise DumpRejected(f"captured with {seen}, the output holds {self._provenance}")

    def drain(self, dump_path, sample):
        """Returns ``("done", row)``, ``("duplicate", path)`` or raises DumpRejected."""
        done_path = self.manifest.is_done(sample.sample_id)
        if done_path is not None:
            if not os.path.exists(os.path.join(self.output_dir, done_path)):
                raise DumpRejected(f"the manifest has it done at {done_path}, which is missing")
            # already durable (a re-sent request after a crash): this dump is a copy
            os.unlink(dump_path)
            return "duplicate", done_path
        # the file index is committed while the dump is loaded and checked (the commit's
        # fsync overlaps the check); no byte is written before the reservation is durable
        reservation = self.manifest.reserve_async(sample.sample_id, names.ckpt_relpath)
        try:
            dump = self.load(dump_path)
            check_dump(self.torch, dump, sample, self.hidden_size, self.captured_layers,
                       finite=not self.check_beside_write)
            self._check_provenance(dump)
        except BaseException:
            self._cancel(reservation, sample.sample_id)
            raise
        payload = {
            "input_ids": dump["input_ids"],
            "loss_mask": self.torch.frombuffer(sample.loss_mask, dtype=self.torch.int64).clone(),
            "hidden_state": dump["hidden_state"],
            "aux_hidden_state": dump["aux_hidden_state"],
        }
        finite = (ckpt_file.helper_pool().submit(check_values, self.torch, dump)
                  if self.check_beside_write else None)
        _idx, relpath = reservation.wait()
        try:
            # beside the write, a dump with NaN/Inf (or degenerate) is rejected before its file is linked:
            # its temporary file is removed and its reservation dropped, as for a failed write
            nbytes, sha = self.write(relpath, payload, before_link=finite and finite.result)
            # the directory holding the new link is fsync'ed by the group commit, before
            # the transaction that marks this sample done
            self.manifest.finish(sample.sample_id, len(sample.input_ids), nbytes, sha,
                                 sync_dir=os.path.dirname(os.path.join(self.output_dir, relpath)))
        except BaseException:
            # ENOSPC, EIO...: the dump stays; undo the reservation so a later try can redo it
            final = os.path.join(self.output_dir, relpath)
            if self.manifest.is_done(sample.sample_id) is None:
                if os.path.exists(final):
                    os.unlink(final)
                self.manifest.drop(sample.sample_id)
            raise
        del dump, payload
        os.unlink(dump_path)
        return "done", {"path": relpath, "bytes": nbytes, "sha256": sha}

    def _cancel(self, reservation, sample_id):
        """Undo a reservation whose dump was rejected: no file was written for it."""
        try:
            reservation.wait()
        except Exception:  # pylint: disable=broad-except
            return   # never committed: nothing to undo
        self.manifest.drop(sample_id)

    def _durable_dir(self, directory):
        """``directory`` exists and its entry is on the disk, for every thread.

        A thread that finds a rows dir another thread has just made must not link into it
        and commit ``done`` before that dir's entry in its parent was fsync'ed: the lock
        holds it until the maker's fsync is done. Each dir is seen to once a process (a
        dir an earlier run made is fsync'ed again, which costs one fsync)."""
        if directory in self._durable_dirs:
            return
        with self._dirs_lock:
            if directory not in self._durable_dirs:
                makedirs_durable(directory)
                if os.path.abspath(directory) != os.path.abspath(self.output_dir):
                    fsync_dir(os.path.dirname(os.path.abspath(directory)))
                self._durable_dirs.add(directory)

    def write(self, relpath, payload, before_link=None):
        """Write ``payload`` durably under ``relpath``: temp file, fsync, link.

        Returns ``(bytes, sha256)``. The bytes go to the disk in ``ckpt_file.MODE``
        (the writeback of each piece started as it is written); the fsync makes them
        durable in every mode. The new directory entry is not fsync'ed here: the caller's
        ``manifest.finish(..., sync_dir=...)`` does it, once for a group. ``before_link``:
        called once the file is durable, before it gets its name (raises to stop it).
        """
        final = os.path.join(self.output_dir, relpath)
        directory = os.path.dirname(final)
        self._durable_dir(directory)
        tmp = os.path.join(directory, f".{os.path.basename(final)}.{os.getpid()}.tmp")
        try:
            with ckpt_file.CkptFile(tmp, torch=self.torch) as f:
                self.torch.save(payload, f)
                f.sync()
            if before_link is not None:
                before_link()
            self._link(tmp, final)
        finally:
            # a failed write (ENOSPC...) leaves no temp file behind until the next start
            if os.path.exists(tmp):
                os.unlink(tmp)
        return f.size, f.sha256.hexdigest()

    def _link(self, tmp, final):  # a step of its own: benchmarks/drain_bench.py times it
        os.link(tmp, final)   # never replaces: EEXIST if a file is there

    def reject(self, dump_path, reason):
        """Keep a rejected dump for a person to look at, off /dev/shm; then remove it."""
        return move_aside(dump_path, self.rejected_dir, reason)


def move_aside(dump_path, rejected_dir, reason):
    """Copy a dump into ``rejected_dir`` (durably, with a ``.reason`` file), then remove it.

    For a person to look at, off /dev/shm: the files mode's rejected dumps, and the capture
    gateway's dumps that could not be placed in the store. Returns the kept file's path."""
    os.makedirs(rejected_dir, exist_ok=True)
    base = os.path.basename(dump_path)
    target = os.path.join(rejected_dir, f"{base}.{time.strftime('%Y%m%dT%H%M%S')}")
    tmp = os.path.join(rejected_dir, f".{base}.tmp")
    with open(dump_path, "rb") as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, target)
    with open(os.path.join(rejected_dir, os.path.basename(target) + ".reason"),
              "w", encoding="utf-8") as f:
        f.write(reason + "\n")
    fsync_dir(rejected_dir)
    os.unlink(dump_path)
    return target


def redo_missing(manifest, output_dir):
    """Forget each ``done`` row whose file is not there; returns their sample ids.

    Such a row is what a crash leaves when a file's directory entry never reached the
    disk (or what a person who removed a file to have it redone wants): its sample is then
    sent and drained again like any other. One stat a finished file, at start only."""
    missing = [sample_id for sample_id, relpath in manifest.done_rows()
               if not os.path.isfile(os.path.join(output_dir, relpath))]
    for sample_id in missing:
        manifest.undo_done(sample_id)
    return missing


def recover(manifest, output_dir):
    """Undo what a crash interrupted: ``writing`` rows, their files and temporary files.

    Returns the number of files removed plus rows dropped. Their dumps still exist (a
    dump is deleted only after ``done``), so the samples are drained again. A temporary
    ``.ckpt`` is only ever made after its row was committed as ``writing``, so looking
    next to those rows finds them all: a resume never walks the (million) finished files.
    """
    count = 0
    for sample_id, relpath in manifest.interrupted():
        path = os.path.join(output_dir, relpath)
        leftovers = glob.glob(os.path.join(glob.escape(os.path.dirname(path)),
                                           "." + glob.escape(os.path.basename(path)) + ".*.tmp"))
        for leftover in leftovers + [path]:
            if os.path.exists(leftover):
                os.unlink(leftover)
                count += 1
        manifest.drop(sample_id)
        count += 1
    rejected = os.path.join(output_dir, "rejected")
    for leftover in glob.glob(os.path.join(glob.escape(rejected), ".*.tmp")):
        os.unlink(leftover)
        count += 1
    return count
