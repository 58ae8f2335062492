#!/usr/bin/env python
# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmarks of the extraction job's drain and manifest (docs/benchmarks.md, "Drain").

  drain:    dumps shaped like the capture's (bf16 final state + K aux layers, int64 ids)
            lie in a dump dir on /dev/shm; the job (roles/extraction_job/files) drains them
            into .ckpt files on the output disk, through its real code path (a run whose
            dumps are all there already sends nothing: the leftover pass drains them). The
            same bytes are then copied by N threads to the same disk, each file fsync'ed
            and its directory fsync'ed, the same durability: the baseline. --variants
            buffered,early,stream,direct alternates drains in the write modes of
            ckpt_file (how the bytes go to the disk; the job's is ckpt_file.MODE; a piece
            size as early:64, the NaN/Inf check beside the write as early+beside), and a
            table shows where each one's time goes, step by step (StepTimes).
  manifest: a manifest of N done samples; time to open it, undo interrupted writes and
            work out which of the N dataset ids are left (what a resume does first).

Needs torch (lab/bootstrap/torch-venv.sh makes a venv with it). Removes what it made.
  .venv-torch/bin/python benchmarks/drain_bench.py drain --dump-root /dev/shm --out /var/tmp/drain-bench
  .venv-torch/bin/python benchmarks/drain_bench.py manifest --samples 1000000 --out /var/tmp/drain-bench
"""
import argparse
import asyncio
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "roles", "extraction_job", "files"))

from eagle3_extraction_job import ckpt_file, config, drain, job, manifest, names  # noqa: E402


def make_dumps(torch, dump_dir, dataset, samples, tokens, hidden, layers):
    with open(dataset, "w", encoding="utf-8") as f:
        for n in range(samples):
            ids = [(n * 131 + k) % 50000 for k in range(tokens)]
            f.write(json.dumps({"id": f"b{n:06d}", "input_ids": ids,
                                "loss_mask": [k % 2 for k in range(tokens)]}) + "\n")
            gen = torch.Generator().manual_seed(n)
            payload = {"input_ids": torch.tensor(ids, dtype=torch.int64),
                       "hidden_state": torch.randn(1, tokens, hidden, generator=gen).to(torch.bfloat16),
                       "aux_hidden_state": torch.randn(1, tokens, layers * hidden,
                                                       generator=gen).to(torch.bfloat16),
                       "rid": f"bench-b{n:06d}", "layer_ids": [1, 29, 57],
                       "captured_layers": [2, 30, 58], "sglang_version": "bench",
                       "model": "bench", "format_version": 1}
            path = os.path.join(dump_dir, names.dump_name_for("bench", f"b{n:06d}"))
            torch.save(payload, path + ".tmp")
            os.replace(path + ".tmp", path)


def du(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _d, fs in os.walk(path) for f in fs)


def copy_baseline(src_dir, dst_dir, workers):
    os.makedirs(dst_dir)

    def one(name):
        dst = os.path.join(dst_dir, name)
        with open(os.path.join(src_dir, name), "rb") as src, open(dst, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 24)
            out.flush()
            os.fsync(out.fileno())
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, sorted(os.listdir(src_dir))))
    drain.fsync_dir(dst_dir)
    return time.perf_counter() - start


def drain_round(args, dataset, dump_dir, out):
    """The job's own leftover pass over every dump: load, check, write, fsync, record, delete."""
    import torch  # pylint: disable=import-outside-toplevel
    # the drain sends nothing: the URL is required, not called
    cfg = config.JobConfig(job="bench", dataset=dataset, output_dir=out, dump_dir=dump_dir,
                           server_url="http://127.0.0.1:9",
                           hidden_size=args.hidden, captured_layers=args.layers,
                           drain_workers=args.drain_workers, output_free_floor_bytes=0,
                           output_free_resume_bytes=0)
    the_job = job.Job(cfg, torch)

    async def drain_all():
        the_job.pool = concurrent.futures.ThreadPoolExecutor(args.drain_workers)
        the_job.load_dataset()
        the_job.open_output()
        start = time.perf_counter()
        drained = await the_job.drain_pass()
        elapsed = time.perf_counter() - start
        the_job.pool.shutdown()
        the_job.manifest.close()
        return drained, elapsed
    return asyncio.run(drain_all())


def use_variant(variant):
    """A variant is ``MODE[:MiB][+beside]`` (drain.set_write_variant): a write mode of
    ``ckpt_file`` (buffered, early, stream, direct), an optional piece size in MiB, and
    ``+beside`` for the NaN/Inf check beside the write; for every drain that starts after
    this call (``Job`` makes its ``Drainer`` then)."""
    try:
        drain.set_write_variant(variant)
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc


DEFAULT_VARIANT = ckpt_file.MODE


class StepTimes:
    """Seconds spent in each step of the write path, summed over threads, while on.

    The job's own functions are wrapped (nothing is replayed): the drain thread's steps
    (load, checks, the wait for the reservation, torch.save into the file object with
    its writes, writeback starts and hash waits, the fsync, the link, the wait for the
    ``done`` commit), the hash on its helper threads and the group commit on the
    committer thread (its directory fsyncs apart)."""

    STEPS = [
        ("drain", "drain, all of it (drain thread)"),
        ("load", "load the dump (torch.load, mmap)"),
        ("check", "checks (ids, shapes, NaN/Inf)"),
        ("finite", "  NaN/Inf part (with +beside: on helper threads, beside the write)"),
        ("reserve", "wait for the reservation's commit"),
        ("save", "torch.save into the file (all below)"),
        ("put", "  the file object's write() (hash waits included)"),
        ("write", "  write syscalls"),
        ("writeback", "  writeback starts (sync_file_range)"),
        ("copy", "  copy into the aligned buffer (direct)"),
        ("fsync", "fsync of the file"),
        ("link", "link to the final name"),
        ("finish", "wait for the done commit (dir fsync + commit)"),
        ("hash", "sha256 (helper threads, beside the write)"),
        ("commit", "group commit (committer thread)"),
        ("dirsync", "  directory fsyncs in it"),
    ]

    def __init__(self):
        self.total = {}
        self.lock = threading.Lock()
        self.local = threading.local()
        self.patches = []

    def add(self, step, secs):
        with self.lock:
            self.total[step] = self.total.get(step, 0.0) + secs

    def timed(self, step, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(step, time.perf_counter() - start)
        return wrapper

    def patch(self, owner, name, step):
        original = getattr(owner, name)
        self.patches.append((owner, name, original))
        setattr(owner, name, self.timed(step, original))

    def __enter__(self):
        self.patch(drain.Drainer, "drain", "drain")
        self.patch(drain.Drainer, "load", "load")
        self.patch(drain, "check_dump", "check")
        self.patch(drain, "check_finite", "finite")
        self.patch(drain, "check_not_degenerate", "degenerate")
        import torch  # pylint: disable=import-outside-toplevel
        self.patch(torch, "save", "save")
        self.patch(ckpt_file.CkptFile, "write", "put")
        for name in ("_write_piece", "_flush_small", "_write_staged"):
            self.patch(ckpt_file.CkptFile, name, "write")
        self.patch(ckpt_file.CkptFile, "_start_writeback", "writeback")
        self.patch(ckpt_file.CkptFile, "_copy_in", "copy")
        self.patch(ckpt_file.CkptFile, "_hash", "hash")
        self.patch(ckpt_file.CkptFile, "sync", "fsync")
        self.patch(drain.Drainer, "_link", "link")
        self.patch(manifest.Manifest, "_commit_batch", "commit")
        self.patch(manifest, "fsync_dir", "dirsync")
        # a ticket's wait is the reservation's unless it is inside finish
        finish, wait, local = manifest.Manifest.finish, manifest._Ticket.wait, self.local

        def timed_finish(*args, **kwargs):
            local.in_finish = True
            start = time.perf_counter()
            try:
                return finish(*args, **kwargs)
            finally:
                local.in_finish = False
                self.add("finish", time.perf_counter() - start)

        def timed_wait(ticket):
            if getattr(local, "in_finish", False):
                return wait(ticket)
            start = time.perf_counter()
            try:
                return wait(ticket)
            finally:
                self.add("reserve", time.perf_counter() - start)
        for owner, name, fn in ((manifest.Manifest, "finish", timed_finish),
                                (manifest._Ticket, "wait", timed_wait)):
            self.patches.append((owner, name, getattr(owner, name)))
            setattr(owner, name, fn)
        return self

    def __exit__(self, *_exc):
        for owner, name, original in reversed(self.patches):
            setattr(owner, name, original)
        self.patches = []


def step_table(times, samples):
    """Rows of ms a sample for each step, one column a variant."""
    variants = list(times)
    lines = ["| step, ms a sample | " + " | ".join(f"`{v}`" for v in variants) + " |",
             "| --- | " + " | ".join("---:" for _v in variants) + " |"]
    for step, label in StepTimes.STEPS:
        if not any(times[v].get(step) for v in variants):
            continue
        lines.append(f"| {label} | " + " | ".join(
            f"{1000 * times[v].get(step, 0.0) / samples[v]:.1f}" for v in variants) + " |")
    return "\n".join(lines)


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def bench_drain(args):
    import torch  # pylint: disable=import-outside-toplevel
    # no torch.set_num_threads here: the drain sets its own (one core a drain thread)
    os.makedirs(args.out, exist_ok=True)  # a fresh machine has no --out yet
    work = tempfile.mkdtemp(prefix="drain-bench-", dir=args.out)
    shm = tempfile.mkdtemp(prefix="drain-bench-", dir=args.dump_root)
    try:
        dump_dir = os.path.join(shm, "sglang_hs")
        os.makedirs(dump_dir)
        dataset = os.path.join(work, "dataset.jsonl")
        make_dumps(torch, dump_dir, dataset, args.samples, args.tokens, args.hidden, args.layers)
        nbytes = du(dump_dir)
        master = os.path.join(shm, "master")
        shutil.copytree(dump_dir, master)
        gb = nbytes / 1e9
        print(f"samples {args.samples}, {args.tokens} tokens x hidden {args.hidden} x "
              f"(1 + {args.layers}) bf16 = {gb:.2f} GB of dumps, {args.rounds} rounds")
        print("| threads | drain | drain samples/s | drain GB/s | copy GB/s | drain / copy (best of "
              "each) | drain / copy (median of rounds, lowest to highest) |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        details, step_tables = [], []
        for workers in args.workers:
            args.drain_workers = workers
            # the disk is shared and its speed drifts: alternate copy and drain(s), best of
            # each; the variants' order turns round by round, so that none always follows
            # the copy
            copies, drains = [], {v: [] for v in args.variants}
            steps = {v: StepTimes() for v in args.variants}
            for rnd in range(args.rounds):
                os.sync()
                copies.append(copy_baseline(master, os.path.join(work, "copy"), workers))
                shutil.rmtree(os.path.join(work, "copy"))
                turn = rnd % len(args.variants)
                for variant in args.variants[turn:] + args.variants[:turn]:
                    use_variant(variant)
                    if not os.listdir(dump_dir):
                        shutil.copytree(master, dump_dir, dirs_exist_ok=True)
                    out = os.path.join(work, "out")
                    os.sync()
                    with steps[variant]:
                        drained, elapsed = drain_round(args, dataset, dump_dir, out)
                    assert drained == args.samples and not os.listdir(dump_dir), "not every dump drained"
                    assert du(os.path.join(out, "rows_0-2000")) >= nbytes * 0.99, "output too small"
                    drains[variant].append(elapsed)
                    shutil.rmtree(out)
                use_variant(DEFAULT_VARIANT)
            copy_s = min(copies)
            for variant, times in drains.items():
                drain_s = min(times)
                # each round's copy and drain ran back to back: their ratio drifts least
                ratios = sorted(c / d for c, d in zip(copies, times))
                print(f"| {workers} | {variant} | {args.samples / drain_s:.1f} | {gb / drain_s:.2f} | "
                      f"{gb / copy_s:.2f} | {copy_s / drain_s:.3f} | {median(ratios):.3f} "
                      f"({ratios[0]:.3f} to {ratios[-1]:.3f}) |", flush=True)
            details.append(f"{workers} threads: copy s " + " ".join(f"{c:.2f}" for c in copies)
                           + "".join(f"; drain {v} s " + " ".join(f"{d:.2f}" for d in times)
                                     for v, times in drains.items()))
            step_tables.append(f"\nwhere the time goes, {workers} drain threads, summed over "
                               f"threads, a sample's mean over {args.rounds} rounds:\n"
                               + step_table({v: t.total for v, t in steps.items()},
                                            {v: args.samples * args.rounds for v in steps}))
        print("\n".join(details))
        print("\n".join(step_tables), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


def bench_manifest(args):
    work = tempfile.mkdtemp(prefix="manifest-bench-", dir=args.out)
    try:
        out = os.path.join(work, "out")
        m = manifest.open_manifest(out)
        start = time.perf_counter()
        # built directly in one transaction: the job's own path (two commits a sample,
        # fsync each) would take hours for a million rows and measures nothing here
        m._db.execute("BEGIN")  # pylint: disable=protected-access
        m._db.executemany(  # pylint: disable=protected-access
            "INSERT INTO samples (sample_id, idx, path, state, tokens, bytes, sha256, done_at) "
            "VALUES (?, ?, ?, 'done', 2353, 134971392, ?, 0)",
            ((f"sample-{n:07d}", n, names.ckpt_relpath(n), f"{n:064x}") for n in range(args.samples)))
        m._db.execute("COMMIT")  # pylint: disable=protected-access
        m.close()
        build_s = time.perf_counter() - start
        dataset_ids = [f"sample-{n:07d}" for n in range(args.samples + args.left)]
        os.sync()
        start = time.perf_counter()
        m = manifest.open_manifest(out)
        drain.recover(m, out)
        done = m.done_ids()
        left = [i for i in dataset_ids if i not in done]
        totals = m.totals()
        resume_s = time.perf_counter() - start
        m.close()
        assert len(left) == args.left and totals["samples"] == args.samples
        print(f"manifest of {args.samples:,} done samples: built in {build_s:.1f} s, "
              f"{os.path.getsize(os.path.join(out, 'manifest.sqlite')) / 1e6:.0f} MB")
        print(f"| resume: open, recover, done set, {len(left):,} left of {len(dataset_ids):,} | "
              f"{resume_s:.2f} s |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="what", required=True)
    d = sub.add_parser("drain")
    d.add_argument("--dump-root", default="/dev/shm")
    d.add_argument("--out", default="/var/tmp")
    d.add_argument("--samples", type=int, default=32)
    d.add_argument("--tokens", type=int, default=512)
    d.add_argument("--hidden", type=int, default=7168)
    d.add_argument("--layers", type=int, default=3)
    d.add_argument("--workers", type=lambda v: [int(n) for n in v.split(",")], default=[2],
                   help="drain threads (and copy threads), comma-separated: 2,4,8")
    d.add_argument("--rounds", type=int, default=7)
    d.add_argument("--variants", type=lambda v: v.split(","), default=[ckpt_file.MODE],
                   help="drains to alternate with the copy, comma-separated MODE[:MiB][+beside]: "
                        "a write mode of ckpt_file (buffered, early, stream, direct; the job's is "
                        f"{ckpt_file.MODE}), a piece size in MiB (early:64), +beside for the "
                        "NaN/Inf check beside the write (early+beside)")
    m = sub.add_parser("manifest")
    m.add_argument("--out", default="/var/tmp")
    m.add_argument("--samples", type=int, default=1_000_000)
    m.add_argument("--left", type=int, default=1000)
    args = parser.parse_args()
    {"drain": bench_drain, "manifest": bench_manifest}[args.what](args)


if __name__ == "__main__":
    main()
