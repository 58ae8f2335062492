"""Where the capture's steady cost goes (lab/gpu/capture_real_sglang.sh profile).

  rounds   prompt tokens/s of --rounds rounds per variant, the variants interleaved
           round by round (lab/gpu/capture_variants switches them inside one
           server), each round --prompts prompts of --tokens tokens; then a torch
           profile (sglang's /start_profile, GPU activity: kernels, copies, CUDA
           runtime calls by thread) of --profile-steps forward passes per variant,
           in a round of its own that is not timed
  summary  what a profile trace says: per stream, the kernels' and copies' busy
           time; the GPU's idle time; copies that waited for a copy engine (start
           later than their own stream allowed); CUDA runtime calls by thread

Standard library only (the traces are gzip'ed chrome JSON). JSON lines start with
``{"profile"`` (per variant) so the shell can collect them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_client import generate, prompt, stats, wait_files  # noqa: E402


def one_round(args, tag, r):
    rids = [f"prof-{tag}-{r}-{i}".replace("+", "_") for i in range(args.prompts)]
    prompts = {rid: prompt(rid, args.tokens) for rid in rids}
    before = stats(args.dump) if args.dump else {}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        codes = list(pool.map(lambda rid: generate(args.url, rid, prompts[rid])[0], rids))
    secs = time.perf_counter() - t0
    rate = args.prompts * args.tokens / secs
    written = None
    if args.dump and tag.split("+")[0] in ("full", "on"):
        written = wait_files(args.dump, rids, timeout=120)
    after = stats(args.dump) if args.dump else {}
    stall = after.get("forward_wait_s", 0) - before.get("forward_wait_s", 0)
    if args.dump:
        for name in os.listdir(args.dump):
            if name.endswith(".pt"):
                _unlink(os.path.join(args.dump, name))
    print(f"INFO round {r} {tag}: {rate:,.0f} prompt tokens/s ({codes.count(200)}/{len(codes)} "
          f"200, {secs:.2f} s; forward waited for a free buffer {stall:.2f} s"
          + ("" if written is None else f"; every file written: {written}") + ")", flush=True)
    return rate


def check_same_files(args, tags):
    """The same prompts, one at a time (a batch of one: the same numbers every time),
    under each of ``tags``: every file's input_ids equal what was sent, and the files of
    all tags are equal bit for bit (the copy in pieces lands what the whole copy did)."""
    import torch

    lengths = [4000, 1500, 37, 2048]
    got = {}
    for tag in tags:
        set_variant(args, tag)
        for i, n in enumerate(lengths):
            rid = f"same-{tag.replace('+', '_')}-{i}"
            generate(args.url, rid, prompt(f"same-{i}", n))
            assert wait_files(args.dump, [rid], timeout=60), rid
            path = os.path.join(args.dump, rid + ".pt")
            data = torch.load(path, weights_only=True)
            os.unlink(path)
            ids_ok = data["input_ids"].tolist() == prompt(f"same-{i}", n)
            got.setdefault(i, []).append((tag, ids_ok, data["hidden_state"], data["aux_hidden_state"]))
    ok = True
    for i, runs in got.items():
        first = runs[0]
        for tag, ids_ok, hidden, aux in runs:
            same = torch.equal(hidden, first[2]) and torch.equal(aux, first[3])
            ok = ok and ids_ok and same and bool(torch.isfinite(hidden.float()).all())
            print(f"{'PASS' if ids_ok and same else 'FAIL'} same files: prompt {i} ({lengths[i]} tokens) "
                  f"under {tag}: input_ids as sent {ids_ok}, hidden and aux equal to {first[0]}'s {same}",
                  flush=True)
    return ok


def set_variant(args, name):
    if args.variant_file:
        with open(args.variant_file, "w") as f:
            f.write(name)
        time.sleep(0.5)  # read by the server at most every 0.2 s


def profile(args, tag):
    """A trace of --profile-steps passes taken in the middle of an untimed round."""
    out = os.path.join(args.profile_dir, tag.replace("+", "_"))
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):  # a trace of an earlier call is not this one's
        _unlink(os.path.join(out, name))
    done = threading.Event()

    def traffic():  # --concurrency requests in flight all the time, as in a round
        def client(c):
            n = 0
            while not done.is_set():
                rid = f"ptr-{tag}-{c}-{n}".replace("+", "_")
                generate(args.url, rid, prompt(rid, args.tokens))
                n += 1

        with ThreadPoolExecutor(args.concurrency) as pool:
            futures = [pool.submit(client, c) for c in range(args.concurrency)]
            while not done.wait(0.5):
                if args.dump:  # a few seconds of dumps would fill /dev/shm otherwise
                    for name in os.listdir(args.dump):
                        if name.endswith(".pt"):
                            _unlink(os.path.join(args.dump, name))
            for future in futures:
                future.result()

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    time.sleep(2.0)
    code, body = _post_text(args.url, "/start_profile", {
        "output_dir": out, "num_steps": args.profile_steps, "activities": ["GPU"],
        "with_stack": False, "record_shapes": False, "profile_prefix": tag.replace("+", "_")})
    trace = None
    end = time.time() + 90
    while time.time() < end and trace is None:
        time.sleep(0.5)
        names = [n for n in os.listdir(out) if n.endswith(".trace.json.gz")]
        if names:
            path = os.path.join(out, names[0])
            size = -1
            while os.path.getsize(path) != size:  # written by the scheduler: let it finish
                size = os.path.getsize(path)
                time.sleep(1.0)
            trace = path
    done.set()
    thread.join()
    if args.dump:
        time.sleep(1.0)  # the last files of the traffic
        for name in os.listdir(args.dump):
            if name.endswith(".pt"):
                _unlink(os.path.join(args.dump, name))
    if trace is None:
        print(f"INFO profile {tag}: no trace ({code} {body})", flush=True)
        return None
    summary = summarize(trace, args.profile_steps)
    print(json.dumps({"profile": tag, **summary}), flush=True)
    return summary


def _post_text(url, path, body):
    """POST for an answer in plain text (sglang's /start_profile says "Start profiling.")."""
    import urllib.request
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read().decode(errors="replace")[:200]
    except OSError as exc:
        return None, repr(exc)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -- the trace -----------------------------------------------------------------------


def _union(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def summarize(path, steps):
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    threads = {}
    gpu, runtime = [], {}
    api = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[e.get("tid")] = e.get("args", {}).get("name", "")
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu.append(e)
        elif cat in ("cuda_runtime", "cuda_driver"):
            corr = e.get("args", {}).get("correlation")
            if corr is not None:
                runtime[corr] = e
            key = (e.get("tid"), e.get("name"))
            api[key][0] += 1
            api[key][1] += e.get("dur", 0)
    if not gpu:
        return {"events": len(events), "gpu_ops": 0}
    gpu.sort(key=lambda e: e["ts"])
    t0 = gpu[0]["ts"]
    t1 = max(e["ts"] + e.get("dur", 0) for e in gpu)
    window = t1 - t0
    per_stream = defaultdict(lambda: {"kernels": 0, "kernel_us": 0.0, "copies": defaultdict(
        lambda: [0, 0, 0.0, 0.0])})
    kernel_intervals = []
    by_kernel = defaultdict(lambda: [0, 0.0])
    last_end = {}
    waits = defaultdict(lambda: [0, 0.0, 0.0])  # copy kind -> [n, waited us, max]
    for e in gpu:
        a = e.get("args", {})
        stream = a.get("stream")
        start, dur = e["ts"], e.get("dur", 0)
        s = per_stream[stream]
        if e["cat"] == "kernel":
            s["kernels"] += 1
            s["kernel_us"] += dur
            kernel_intervals.append((start, start + dur))
            k = by_kernel[e["name"][:70]]
            k[0] += 1
            k[1] += dur
        else:
            name = e["name"]
            c = s["copies"][name]
            c[0] += 1
            c[1] += int(a.get("bytes", 0) or 0)
            c[2] += dur
            c[3] = max(c[3], dur)
            call = runtime.get(a.get("correlation"))
            if call is not None and e["cat"] == "gpu_memcpy":
                # when its own stream let it start: after the call, after the stream's
                # last op; later than that, it waited for something else (a copy engine)
                ready = max(call["ts"], last_end.get(stream, 0.0))
                waited = max(0.0, start - ready)
                size = "small" if int(a.get("bytes", 0) or 0) < (1 << 20) else "large"
                w = waits[f"{name} on stream {stream}, {size}"]
                w[0] += 1
                w[1] += waited
                w[2] = max(w[2], waited)
        last_end[stream] = max(last_end.get(stream, 0.0), start + dur)
    busy = _union(kernel_intervals)
    # the forward stream (most kernel time): its gaps over 1 ms, where the GPU waited
    main = max(per_stream, key=lambda k: per_stream[k]["kernel_us"])
    starts = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in gpu
                    if e["cat"] == "kernel" and e.get("args", {}).get("stream") == main)
    gaps = [b[0] - a[1] for a, b in zip(starts, starts[1:]) if b[0] - a[1] > 1000]
    top = sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:10]
    out = {
        "steps": steps,
        "window_ms": round(window / 1e3, 2),
        "per_step_ms": round(window / 1e3 / max(steps, 1), 2),
        "kernel_busy_ms": round(busy / 1e3, 2),
        "gpu_idle_ms": round((window - busy) / 1e3, 2),
        "forward_stream": str(main),
        "forward_stream_gaps_over_1ms": [round(g / 1e3, 2) for g in gaps],
        "streams": {str(k): {"kernels": v["kernels"], "kernel_ms": round(v["kernel_us"] / 1e3, 2),
                             "copies": {n: {"n": c[0], "MB": round(c[1] / 1e6, 1),
                                            "ms": round(c[2] / 1e3, 2), "max_ms": round(c[3] / 1e3, 2),
                                            "GBps": round(c[1] / c[2] / 1e3, 1) if c[2] else None}
                                        for n, c in v["copies"].items()}}
                    for k, v in per_stream.items()},
        "copy_waits": {k: {"n": w[0], "waited_ms": round(w[1] / 1e3, 2), "max_ms": round(w[2] / 1e3, 2)}
                       for k, w in waits.items()},
        "top_kernels": [{"name": n, "n": v[0], "ms": round(v[1] / 1e3, 2),
                         "mean_us": round(v[1] / v[0], 1)} for n, v in top],
        "api": sorted(({"thread": f"{threads.get(tid, '')}/{tid}", "call": name, "n": v[0],
                        "ms": round(v[1] / 1e3, 2)} for (tid, name), v in api.items()),
                      key=lambda d: -d["ms"])[:14],
    }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--dump", default="")
    parser.add_argument("--variants", default="full",
                        help="comma-separated; 'off' for a server without the capture")
    parser.add_argument("--variant-file", default="")
    parser.add_argument("--profile-variants", default="", help="comma-separated; default: --variants")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=384)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--profile-dir", default="/tmp/capture-profiles")
    parser.add_argument("--profile-steps", type=int, default=12)
    parser.add_argument("--summary", default="", help="summarize this trace file and exit")
    parser.add_argument("--check", default="", help="comma-separated variants whose files must be equal")
    args = parser.parse_args()
    if args.summary:
        print(json.dumps(summarize(args.summary, args.profile_steps), indent=1))
        return 0
    variants = args.variants.split(",")
    ok = check_same_files(args, args.check.split(",")) if args.check else True
    set_variant(args, variants[0])
    one_round(args, variants[0], "warm")  # kernels compiled, buffers touched: untimed
    rates = defaultdict(list)
    for r in range(args.rounds):
        for v in variants:
            set_variant(args, v)
            rates[v].append(one_round(args, v, r))
    base = statistics.mean(rates[variants[0]])
    print(json.dumps({"rounds": {v: [round(x) for x in rs] for v, rs in rates.items()},
                      "mean": {v: round(statistics.mean(rs)) for v, rs in rates.items()},
                      f"vs_{variants[0]}": {v: round(statistics.mean(rs) / base, 4)
                                            for v, rs in rates.items()}}), flush=True)
    for v in (args.profile_variants or args.variants).split(","):
        if v and v != "-":
            set_variant(args, v)
            profile(args, v)
    set_variant(args, "full")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
