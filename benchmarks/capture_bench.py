#!/usr/bin/env python
"""Throughput and cost of the hidden-state capture, on a GPU machine (torch only).

Runs the real capture module (roles/sglang_patch/files/eagle3_hs_capture.py) on
batches shaped like a Kimi-K2 / DeepSeek-V3 prefill: --tokens new tokens a pass,
--hidden wide, the final hidden state plus 3 aux layers in bf16 (4 x 7168 x 2 =
57,344 bytes a token), split into --requests requests. In one run it measures:

  capture   the capture path: on_forward() for every batch, until every file is
            renamed into place (device-to-host on a side stream, N writer threads)
  save      plain torch.save(t.cpu()) per request, one thread (the naive way)
  raw       the limit: the same bytes written from pinned memory into new files
            with os.write, by the same N threads
  overhead  a prefill-sized GPU workload (a bf16 GEMM chain of about --pass-ms a
            pass) with and without the capture hooked after every pass

and prints a markdown table. Goals: capture >= 5x save, >= 70 % of raw
at the same thread count, <= 5 % added to the workload.

    python3 benchmarks/capture_bench.py --dir /dev/shm/capture-bench --threads 1,4,8,16
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "roles", "sglang_patch", "files"))
import eagle3_hs_capture as capture  # noqa: E402  (the module the role installs)


class ForwardMode:
    """Only .name is read by the capture (it compares with sglang's EXTEND)."""

    name = "EXTEND"


def make_batch(tokens, hidden, requests, device, seed):
    """Device tensors of one pass and a ForwardBatch stand-in with sglang's field names."""
    gen = torch.Generator(device=device).manual_seed(seed)
    per = tokens // requests
    lens = [per] * (requests - 1) + [tokens - per * (requests - 1)]
    ids = torch.randint(0, 150000, (tokens,), device=device, generator=gen)
    h = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16, generator=gen)
    aux = torch.randn(tokens, 3 * hidden, device=device, dtype=torch.bfloat16, generator=gen)
    batch = types.SimpleNamespace(
        forward_mode=ForwardMode(),
        rids=[f"b{seed}-r{k}" for k in range(requests)],
        extend_seq_lens_cpu=lens,
        extend_prefix_lens_cpu=[0] * requests,
        extend_seq_lens=None,
        extend_prefix_lens=None,
        orig_seq_lens=torch.tensor(lens, dtype=torch.int32, device=device),
    )
    return batch, ids, h, aux, lens


def payload_bytes(tokens, hidden):
    return tokens * hidden * 4 * 2  # hidden + 3 aux, bf16 (input_ids not counted)


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def bench_capture(batches, threads, out_dir):
    fresh_dir(out_dir)
    cap = capture.HiddenStateCapture(out_dir, writer_threads=threads,
                                     max_pending=max(2, threads), metadata={"bench": 1})
    torch.cuda.synchronize()
    start = time.perf_counter()
    for batch, ids, h, aux, _lens in batches:
        cap.on_forward(batch, ids, h, aux)
    assert cap.flush(timeout=600)
    elapsed = time.perf_counter() - start
    files = cap.stats["files"]
    cap.close()
    if cap.failure:
        raise SystemExit(f"capture failed: {cap.failure}")
    return elapsed, files


def check_files(batch, out_dir):
    """Every file of a captured batch loads and equals the device tensors exactly."""
    batch, ids, h, aux, lens = batch
    lo = 0
    for rid, size in zip(batch.rids, lens):
        hi = lo + size
        data = torch.load(os.path.join(out_dir, capture.file_name_for(rid)), weights_only=True)
        assert data["rid"] == rid
        assert torch.equal(data["input_ids"], ids[lo:hi].cpu())
        assert torch.equal(data["hidden_state"], h[lo:hi].cpu()[None])
        assert torch.equal(data["aux_hidden_state"], aux[lo:hi].cpu()[None])
        lo = hi


def bench_torch_save(batches, out_dir):
    # torch's defaults: the capture turns the zip CRC off process-wide, turn it back on
    try:
        from torch.utils.serialization import config
        config.save.compute_crc32 = True
    except (ImportError, AttributeError):
        pass
    fresh_dir(out_dir)
    torch.cuda.synchronize()
    start = time.perf_counter()
    n = 0
    for batch, ids, h, aux, lens in batches:
        lo = 0
        for rid, size in zip(batch.rids, lens):
            hi = lo + size
            torch.save({"input_ids": ids[lo:hi].cpu(), "hidden_state": h[lo:hi].cpu()[None],
                        "aux_hidden_state": aux[lo:hi].cpu()[None]},
                       os.path.join(out_dir, f"{rid}.pt"))
            lo, n = hi, n + 1
    return time.perf_counter() - start, n


def bench_raw(batches, threads, out_dir):
    """os.write of the same bytes from pinned host memory into new files, N threads."""
    chunks = []
    for batch, ids, h, aux, lens in batches:
        lo = 0
        for rid, size in zip(batch.rids, lens):
            hi = lo + size
            for name, t in (("h", h[lo:hi]), ("a", aux[lo:hi])):
                host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                host.copy_(t)
                chunks.append((f"{rid}.{name}", host))
            lo = hi
    fresh_dir(out_dir)
    work = list(range(len(chunks)))
    lock = threading.Lock()

    def writer():
        while True:
            with lock:
                if not work:
                    return
                i = work.pop()
            name, host = chunks[i]
            view = _raw_view(host)
            fd = os.open(os.path.join(out_dir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                done = 0
                while done < len(view):
                    done += os.write(fd, view[done:])
            finally:
                os.close(fd)

    pool = [threading.Thread(target=writer) for _thread in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start


def _raw_view(host):
    """The pinned tensor's bytes, without a copy (and without NumPy)."""
    import ctypes

    size = host.numel() * host.element_size()
    return memoryview((ctypes.c_char * size).from_address(host.data_ptr())).cast("B")


def bench_overhead(tokens, hidden, requests, passes, pass_ms, threads, out_dir, device):
    """A prefill-sized GEMM chain a pass; the capture hooked after each pass or not."""
    x = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16)
    w = torch.randn(hidden, hidden, device=device, dtype=torch.bfloat16) / hidden ** 0.5
    # calibrate, after a warm-up (cuBLAS picks its kernel on the first call):
    # GEMMs per pass to take about pass_ms
    for _warm in range(5):
        y = x @ w
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _gemm in range(50):
        y = x @ w
    torch.cuda.synchronize()
    per_gemm_ms = (time.perf_counter() - t0) * 1e3 / 50
    gemms = max(1, round(pass_ms / per_gemm_ms))
    batch, ids = make_batch(tokens, hidden, requests, device, seed=1234)[:2]

    def run(cap):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _pass in range(passes):
            y = x
            for _gemm in range(gemms):
                y = y @ w
            h = y
            aux = torch.cat([y, y, y], dim=-1)  # what the packer hands over
            if cap is not None:
                cap.on_forward(batch, ids, h, aux)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    run(None)  # warm-up
    base = run(None)
    fresh_dir(out_dir)
    cap = capture.HiddenStateCapture(out_dir, writer_threads=threads,
                                     max_pending=max(2, threads), metadata={"bench": 1})
    with_cap = run(cap)
    assert cap.flush(timeout=600)
    cap.close()
    return base / passes * 1e3, with_cap / passes * 1e3, gemms


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default="/dev/shm/capture-bench")
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--requests", type=int, default=8, help="requests a batch")
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--threads", default="1,4,8,16")
    p.add_argument("--save-batches", type=int, default=2, help="batches for the slow torch.save run")
    p.add_argument("--passes", type=int, default=20)
    p.add_argument("--pass-ms", type=float, default=250.0)
    p.add_argument("--overhead-threads", type=int, default=8)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    device = torch.device("cuda:0")
    threads = [int(t) for t in args.threads.split(",")]
    gb = payload_bytes(args.tokens, args.hidden) / 1e9

    batches = [make_batch(args.tokens, args.hidden, args.requests, device, seed=i)
               for i in range(args.batches)]
    # warm-up (pinned allocator, streams, threads), and proof that the files are exact
    bench_capture(batches[:1], 1, args.dir)
    check_files(batches[0], args.dir)
    rows = []
    save_s, save_files = bench_torch_save(batches[:args.save_batches], args.dir)
    save_gbs = gb * args.save_batches / save_s
    for n in threads:
        cap_s, files = bench_capture(batches, n, args.dir)
        assert files == args.batches * args.requests, (files, args.batches * args.requests)
        raw_s = bench_raw(batches, n, args.dir)
        cap_gbs, raw_gbs = gb * args.batches / cap_s, gb * args.batches / raw_s
        rows.append((n, cap_gbs, raw_gbs))
    base_ms, cap_ms, gemms = bench_overhead(args.tokens, args.hidden, args.requests, args.passes,
                                            args.pass_ms, args.overhead_threads, args.dir, device)
    shutil.rmtree(args.dir, ignore_errors=True)

    print(f"GPU: {torch.cuda.get_device_name(device)}, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs, into {args.dir}")
    print(f"{args.batches} batches of {args.tokens} tokens x {args.hidden} hidden x 4 tensors bf16 "
          f"({gb * 1e3:.0f} MB a batch), {args.requests} requests a batch\n")
    print("| writer threads | capture GB/s | raw pinned->file GB/s | capture / raw | capture / torch.save |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n, cap_gbs, raw_gbs in rows:
        print(f"| {n} | {cap_gbs:.2f} | {raw_gbs:.2f} | {cap_gbs / raw_gbs:.0%} | {cap_gbs / save_gbs:.1f}x |")
    print(f"\nplain torch.save(t.cpu()), 1 thread: {save_gbs:.2f} GB/s ({save_files} files)")
    print(f"prefill-sized workload ({gemms} GEMMs {args.tokens}x{args.hidden}x{args.hidden} a pass, "
          f"{args.passes} passes): {base_ms:.1f} ms a pass alone, {cap_ms:.1f} ms with the capture "
          f"({args.overhead_threads} writers): {(cap_ms - base_ms) / base_ms:+.1%}")


if __name__ == "__main__":
    main()
