"""Client side of the real-SGLang capture proof (lab/gpu/capture_real_sglang.sh).

Sends requests with token ids to a running SGLang server whose deepseek_v2.py the
sglang_patch role patched, and checks what lands in the dump dir:

  scenarios  short prompts, prompts chunked over several passes, 16 at once, health
             checks, a rid-less request, a hex-looking rid, a long request aborted
             and sent again with the same rid; every file checked against what was sent
  inflight   many requests in flight, then SIGTERM to the server's process group (as
             systemd stops a unit): every request answered 200 must have its file
  compare    the same prompts to a second server without the capture, started with
             --enable-return-hidden-states: its hidden states must equal the dumps
  bench      prompt tokens/s, prompts of --tokens tokens, --concurrency at a time
  send       a fixed set of prompts (short, chunked, 16 at once) to a tensor-parallel
             server: one file per request, each checked, and every *.tmp name seen
             while they were written carries the pid of the TP-0 scheduler
  tpdiff     the dumps of two servers for the same prompts (TP 2 against TP 1):
             input_ids equal, hidden states within bf16 all-reduce tolerance

Standard library and torch only (the GPU machine's python3 has torch). Prints one
line per check, ``PASS`` or ``FAIL``, and a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor

VOCAB = 31000
RESULTS = {"pass": 0, "fail": 0, "failed": []}


def check(ok, what):
    RESULTS["pass" if ok else "fail"] += 1
    if not ok:
        RESULTS["failed"].append(what)
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
    return ok


def prompt(rid, length):
    """The token ids a rid sends: the same on every run and in every process."""
    rng = random.Random(zlib.crc32(rid.encode()))
    return [rng.randrange(2, VOCAB) for _position in range(length)]


def post(url, path, body, timeout=300):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:300]
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
        return None, repr(exc)


def get(url, path, timeout=60):
    try:
        with urllib.request.urlopen(url + path, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None


def generate(url, rid, ids, hidden=False, timeout=300):
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    if rid is not None:
        body["rid"] = rid
    if hidden:
        body["return_hidden_states"] = True
    return post(url, "/generate", body, timeout)


def dump_path(dump, rid):
    return os.path.join(dump, rid + ".pt")


def wait_files(dump, rids, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if all(os.path.exists(dump_path(dump, r)) for r in rids):
            return True
        time.sleep(0.2)
    return False


def check_dump(dump, rid, ids, hidden_size, n_aux):
    import torch

    path = dump_path(dump, rid)
    if not check(os.path.exists(path), f"{rid}: {os.path.basename(path)} exists"):
        return None
    data = torch.load(path, weights_only=True)
    t = len(ids)
    h, a = data["hidden_state"], data["aux_hidden_state"]
    ok = (torch.equal(data["input_ids"].cpu(), torch.tensor(ids, dtype=data["input_ids"].dtype))
          and tuple(h.shape) == (1, t, hidden_size) and tuple(a.shape) == (1, t, n_aux * hidden_size)
          and h.dtype == torch.bfloat16 and a.dtype == torch.bfloat16
          and bool(torch.isfinite(h).all()) and bool(torch.isfinite(a).all()))
    check(ok, f"{rid}: input_ids equal the {t} sent; hidden [1,{t},{hidden_size}], "
              f"aux [1,{t},{n_aux * hidden_size}], bf16, finite "
              f"(got {tuple(h.shape)} {tuple(a.shape)} {h.dtype})")
    return data


def stats(dump):
    try:
        with open(os.path.join(dump, "CAPTURE_STATS.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def tmp_files(dump):
    return sorted(f for f in os.listdir(dump) if f.endswith(".tmp"))


# -- scenarios ---------------------------------------------------------------------


def scenarios(args):
    url, dump = args.url, args.dump
    sent = {}

    def send(rid, length):
        ids = prompt(rid, length)
        status = generate(url, rid, ids)[0]
        sent[rid] = ids
        return status

    for i, n in enumerate([5, 17, 33, 64, 100, 150, 230, 300]):
        check(send(f"short-{i}", n) == 200, f"short-{i} ({n} tokens): 200")
    for i, n in enumerate([2500, 4000]):
        check(send(f"chunk-{i}", n) == 200, f"chunk-{i} ({n} tokens, chunked): 200")
    with ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(lambda i: send(f"conc-{i}", 50 + 47 * i), range(16)))
    check(codes == [200] * 16, f"16 at once: all 200 ({codes.count(200)})")
    health = [get(url, "/health") for _attempt in range(5)]
    check(health == [200] * 5, f"/health x5: {health}")
    status = generate(url, None, prompt("rid-less", 40))[0]
    check(status == 200, "a rid-less request: 200")
    hex_rid = "0123456789abcdef0123456789abcdef"
    status = generate(url, hex_rid, prompt(hex_rid, 40))[0]
    check(status == 200, "a 32-hex rid: 200")

    # a long prompt aborted while it is prefilled, then sent again with its rid
    rid, ids = "abort-1", prompt("abort-1", args.abort_tokens)
    before = stats(dump).get("skipped", {})
    first = {}
    t = threading.Thread(target=lambda: first.update(r=generate(url, rid, ids)))
    t.start()
    time.sleep(args.abort_after)
    abort_status = post(url, "/abort_request", {"rid": rid})[0]
    t.join(120)
    cut = not os.path.exists(dump_path(dump, rid))
    print(f"INFO abort: /abort_request {abort_status}; first attempt answered "
          f"{first.get('r', (None,))[0]}; cut before its last chunk: {cut}", flush=True)
    first_file = os.stat(dump_path(dump, rid)) if not cut and wait_files(dump, [rid]) else None
    status = generate(url, rid, ids)[0]
    check(status == 200, f"{rid}: sent again with the same rid: 200")
    sent[rid] = ids

    check(wait_files(dump, sent), "every request with a rid has its file")
    for rid, ids in sent.items():
        check_dump(dump, rid, ids, args.hidden, args.aux)
    names = set(os.listdir(dump))
    check(f"{hex_rid}.pt" not in names, "no file for the 32-hex rid")
    check(not [n for n in names if n.startswith("HEALTH_CHECK")], "no file for a health check")
    extra = sorted(n for n in names if n.endswith(".pt") and n[:-3] not in sent)
    check(extra == [], f"no file for the rid-less request or the warm-up ({extra})")
    time.sleep(1.5)  # the stats file is written at most once a second
    s = stats(dump)
    skipped = s.get("skipped", {})
    print("INFO CAPTURE_STATS.json: " + json.dumps(s, sort_keys=True), flush=True)
    check(skipped.get("health_check", 0) >= 5, f"health checks counted ({skipped.get('health_check')})")
    check(skipped.get("warmup", 0) >= 1, f"the warm-up counted ({skipped.get('warmup')})")
    check(skipped.get("rid_rule", 0) >= 2,
          f"the rid-less and the hex rid counted under rid_rule ({skipped.get('rid_rule')})")
    if cut:
        check(skipped.get("incomplete", 0) >= before.get("incomplete", 0) + 1,
              f"the aborted attempt counted incomplete ({skipped.get('incomplete')})")
    elif first_file is not None:  # the abort came too late: the retry must not rewrite
        again = os.stat(dump_path(dump, rid))
        check((again.st_ino, again.st_mtime_ns) == (first_file.st_ino, first_file.st_mtime_ns)
              and skipped.get("duplicate", 0) >= before.get("duplicate", 0) + 1,
              f"{rid}: the abort came after the prefill; the retry left the first file "
              f"alone and was counted duplicate ({skipped.get('duplicate')})")
    check(s.get("dumped") == len(sent), f"stats: dumped {s.get('dumped')} == {len(sent)} files")
    check(tmp_files(dump) == [], "no *.tmp left")
    with open(os.path.join(dump, "..", "sent.json"), "w") as f:
        json.dump({rid: len(ids) for rid, ids in sent.items()}, f)


def inflight(args):
    """Requests in flight, SIGTERM to the process group, then: a file for every 200."""
    url, dump = args.url, args.dump
    answered, lock, stop = [], threading.Lock(), threading.Event()

    def one(i):
        rid = f"inflight-{i}"
        status = generate(url, rid, prompt(rid, args.tokens), timeout=120)[0]
        if status == 200:
            with lock:
                answered.append(rid)
                if len(answered) == args.stop_after:
                    stop.set()
        return status

    pool = ThreadPoolExecutor(args.concurrency)
    futures = [pool.submit(one, i) for i in range(args.count)]
    stop.wait(300)
    t0 = time.time()
    os.killpg(args.pgid, signal.SIGTERM)
    print(f"INFO SIGTERM to process group {args.pgid} after {len(answered)} answers", flush=True)
    gone = False
    while time.time() - t0 < args.stop_timeout:
        try:
            os.killpg(args.pgid, 0)
        except ProcessLookupError:
            gone = True
            break
        time.sleep(0.2)
    if not gone:
        os.killpg(args.pgid, signal.SIGKILL)
    codes = [f.result() for f in futures]
    pool.shutdown()
    print(f"INFO server gone {time.time() - t0:.1f} s after SIGTERM "
          f"({'by itself' if gone else 'SIGKILL after the stop timeout'}); "
          f"{codes.count(200)} of {len(codes)} requests answered 200", flush=True)
    missing = sorted(r for r in answered if not os.path.exists(dump_path(dump, r)))
    check(not missing, f"every request answered 200 has its file ({len(answered)} answered; "
                       f"without a file: {missing})")
    check(tmp_files(dump) == [], f"no *.tmp left after the stop ({tmp_files(dump)})")
    s = stats(dump)
    print("INFO CAPTURE_STATS.json after the stop: " + json.dumps(s, sort_keys=True), flush=True)
    for rid in answered[:3]:
        check_dump(dump, rid, prompt(rid, args.tokens), args.hidden, args.aux)


def compare(args):
    """A server without the capture returns the final hidden states: equal to the dumps."""
    import torch

    with open(args.sent) as f:
        sent = json.load(f)
    worst = 0.0
    for rid in args.rids.split(","):
        ids = prompt(rid, sent[rid])
        status, out = generate(args.url, f"cmp-{rid}", ids, hidden=True)
        if not check(status == 200, f"{rid}: 200 from the capture-less server"):
            continue
        rows = out["meta_info"]["hidden_states"][0]
        got = torch.tensor(rows, dtype=torch.float32)
        if got.dim() == 1:
            got = got.unsqueeze(0)
        dumped = torch.load(dump_path(args.dump, rid), weights_only=True)["hidden_state"][0]
        want = dumped[-got.shape[0]:].float()  # a chunked prompt returns its last chunk's rows
        diff = float((got - want).abs().max()) if got.shape == want.shape else float("inf")
        worst = max(worst, diff)
        check(diff == 0.0, f"{rid}: {got.shape[0]} rows of --enable-return-hidden-states equal "
                           f"the dump (max abs diff {diff})")
    print(f"INFO max abs diff over {len(args.rids.split(','))} prompts: {worst}", flush=True)


def bench(args):
    """Prompt tokens/s for --rounds rounds of --prompts prompts; dumps removed between."""
    rates = []
    for r in range(args.rounds):
        rids = [f"bench-{args.tag}-{r}-{i}" for i in range(args.prompts)]
        prompts = {rid: prompt(rid, args.tokens) for rid in rids}
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            codes = list(pool.map(lambda rid: generate(args.url, rid, prompts[rid])[0], rids))
        secs = time.perf_counter() - t0
        rate = args.prompts * args.tokens / secs
        rates.append(rate)
        print(f"INFO bench {args.tag} round {r}: {rate:,.0f} prompt tokens/s "
              f"({codes.count(200)}/{len(codes)} 200, {secs:.2f} s)", flush=True)
        if args.dump:
            wait_files(args.dump, rids, timeout=120)
            for name in os.listdir(args.dump):
                if name.endswith(".pt"):
                    os.unlink(os.path.join(args.dump, name))
    print(json.dumps({"bench": args.tag, "rates": rates}), flush=True)


# -- tensor parallelism ----------------------------------------------------------------

TP_SET = ([(f"tp-{i}", n) for i, n in enumerate([5, 17, 64, 300, 1000, 2500, 4000])]
          + [(f"tpc-{i}", 50 + 97 * i) for i in range(16)])


def schedulers():
    """{pid: title} of sglang's scheduler processes (setproctitle: sglang::scheduler_TP<r>)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title = f.read().split(b"\0")[0].decode(errors="replace").strip()
        except OSError:
            continue
        if title.startswith("sglang::scheduler"):
            found[int(entry)] = title
    return found


def tmp_writer_pids(dump, stop, seen):
    """Until stop is set: the pid field of every ``<rid>.pt.<pid>.<tag>.tmp`` in dump."""
    while not stop.is_set():
        for name in os.listdir(dump):
            if name.endswith(".tmp") and ".pt." in name:
                pid = name.rsplit(".pt.", 1)[1].split(".")[0]
                if pid.isdigit():
                    seen.setdefault(int(pid), 0)
                    seen[int(pid)] += 1
        time.sleep(0.001)


def send(args):
    url, dump = args.url, args.dump
    procs = schedulers()
    print("INFO schedulers: " + ", ".join(f"{t} pid {p}" for p, t in sorted(procs.items())), flush=True)
    rank0 = [p for p, t in procs.items() if t.endswith("TP0")]
    check(len(procs) == args.tp and len(rank0) == 1,
          f"{args.tp} scheduler processes, one of them TP0 ({len(procs)} found)")
    seen, stop = {}, threading.Event()
    watcher = threading.Thread(target=tmp_writer_pids, args=(dump, stop, seen), daemon=True)
    watcher.start()
    codes = [generate(url, rid, prompt(rid, n))[0] for rid, n in TP_SET[:7]]
    with ThreadPoolExecutor(16) as pool:
        codes += list(pool.map(lambda rn: generate(url, rn[0], prompt(*rn))[0], TP_SET[7:]))
    check(codes == [200] * len(TP_SET), f"{len(TP_SET)} requests: all 200 ({codes.count(200)})")
    check(wait_files(dump, [rid for rid, _n in TP_SET]), "every request has its file")
    stop.set()
    watcher.join()
    for rid, n in TP_SET:
        check_dump(dump, rid, prompt(rid, n), args.hidden, args.aux)
    files = sorted(n for n in os.listdir(dump) if n.endswith(".pt"))
    check(files == sorted(f"{rid}.pt" for rid, _n in TP_SET),
          f"exactly one file per request ({len(files)} files for {len(TP_SET)} requests)")
    time.sleep(1.5)  # the stats file is written at most once a second
    writer = stats(dump).get("pid")
    print(f"INFO *.tmp names seen while writing, by pid: {seen}; CAPTURE_STATS.json pid {writer}",
          flush=True)
    check(bool(rank0) and writer == rank0[0] and set(seen) <= {rank0[0]},
          f"written by one process, the TP0 scheduler (pid {rank0[:1]}): stats pid {writer}, "
          f"*.tmp pids {sorted(seen)}")
    check(tmp_files(dump) == [], "no *.tmp left")


def tpdiff(args):
    """Compare two servers' dumps of TP_SET: exact input_ids, close hidden states."""
    import torch

    worst = {"hidden_state": [0.0, 0.0], "aux_hidden_state": [0.0, 0.0]}
    outside = total = 0
    for rid, n in TP_SET:
        ref = torch.load(dump_path(args.ref, rid), weights_only=True)
        got = torch.load(dump_path(args.dump, rid), weights_only=True)
        check(torch.equal(ref["input_ids"], got["input_ids"]), f"{rid}: input_ids equal ({n})")
        for key, w in worst.items():
            a, b = ref[key].float(), got[key].float()
            if not check(a.shape == b.shape, f"{rid}: {key} shapes {tuple(a.shape)} {tuple(b.shape)}"):
                continue
            diff = (a - b).abs()
            w[0] = max(w[0], float(diff.max()))
            w[1] = max(w[1], float(diff.norm() / a.norm().clamp_min(1e-30)))
            # two bf16 roundings of each partial sum: 2 ulps of the value, and of the
            # tensor's rms for values near 0
            tol = 2 ** -6 * (a.abs() + a.pow(2).mean().sqrt())
            outside += int((diff > tol).sum())
            total += diff.numel()
    for key, (max_abs, rel) in worst.items():
        print(f"INFO {args.label} {key}: max abs diff {max_abs:.4g}, worst relative L2 error "
              f"{rel:.3%}", flush=True)
        check(rel <= args.max_rel, f"{args.label} {key}: relative L2 error {rel:.3%} <= "
                                   f"{args.max_rel:.0%} on every prompt (max abs diff {max_abs:.4g})")
    print(f"INFO {args.label}: {outside} of {total} values ({outside / max(total, 1):.4%}) "
          f"outside 2 bf16 ulps of the reference", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("scenarios", "inflight", "compare", "bench", "send", "tpdiff"):
        p = sub.add_parser(name)
        p.add_argument("--url", required=True)
        p.add_argument("--dump", default="")
        p.add_argument("--hidden", type=int, default=2048)
        p.add_argument("--aux", type=int, default=2)
    sub.choices["scenarios"].add_argument("--abort-tokens", type=int, default=12000)
    sub.choices["scenarios"].add_argument("--abort-after", type=float, default=0.15)
    p = sub.choices["inflight"]
    p.add_argument("--pgid", type=int, required=True)
    p.add_argument("--count", type=int, default=48)
    p.add_argument("--tokens", type=int, default=1500)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--stop-after", type=int, default=12)
    p.add_argument("--stop-timeout", type=float, default=70)
    p = sub.choices["compare"]
    p.add_argument("--sent", required=True)
    p.add_argument("--rids", required=True)
    p = sub.choices["bench"]
    p.add_argument("--tag", required=True)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--prompts", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    sub.choices["send"].add_argument("--tp", type=int, default=2)
    p = sub.choices["tpdiff"]
    p.add_argument("--ref", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--max-rel", type=float, default=0.02)
    args = parser.parse_args()
    globals()[args.cmd](args)
    print("SUMMARY " + json.dumps(RESULTS), flush=True)
    return 0 if RESULTS["fail"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
