"""The collection's job and SpecForge's own pipeline, each run and timed the same way
(lab/gpu/specforge_side_by_side.sh). Subcommands:

  job        the extraction job (python -m eagle3_extraction_job run) on a conversations
             dataset against a running server: from its first request until it exits,
             when every sample is a .ckpt on the output disk, fsynced and recorded
  specforge  SpecForge's prepare_hidden_states.py under torchrun (through
             specforge_prepare.py): from the moment its output rows dir appears (right
             before its first forward) until it exits and every file it wrote is
             fsynced (it does not fsync: the fsync of each file and dir is timed here)
  disk       the output disk's own parallel fsynced write rate: --writers threads write
             --bytes in files of --file-bytes, each file and its dir fsynced
  summary    the speed table of what job, specforge and disk recorded ($SIDE_BY_SIDE_RECORD)
  losses     the loss lines of two SpecForge training logs: a table of the eval loss and
             the training loss's moving mean, a PNG, a verdict (every loss finite, the
             eval loss falling)

Each prints INFO lines and one JSON line; job and specforge also print the tokens/s.
"""

import argparse
import ast
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARKERS = {"chat_assistant_header": "<|im_start|>assistant\n", "chat_end_of_turn": "<|im_end|>\n",
           "chat_system_prompt": "You are a helpful assistant."}


def emit(result):
    """The JSON line of a result, printed, and appended to $SIDE_BY_SIDE_RECORD if set
    (what ``summary`` reads)."""
    line = json.dumps(result)
    print(line, flush=True)
    record = os.environ.get("SIDE_BY_SIDE_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def run_summary(args):
    """The speed table from the recorded results: ours against SpecForge's best, both
    against the disk, to three decimals (the goals are judged at 3.0x and 0.90)."""
    jobs, sf, disks = [], [], {}
    with open(args.record, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            jobs += [r["job"]] if "job" in r else []
            sf += [r["specforge"]] if "specforge" in r else []
            if "disk" in r:
                disks[r["disk"]["writers"]] = r["disk"]["bytes_per_s"]
    if not jobs or not sf:
        print("INFO summary: no result of ours or of SpecForge recorded")
        return 1
    ours = jobs[-1]
    best = max(sf, key=lambda r: r["tokens_per_s"])
    bytes_per_token = args.bytes / ours["tokens"] if args.bytes else 0
    print("| pipeline | seconds to every file durable | tokens/s | GB/s | vs the disk (8 writers) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, r in [(f"ours ({ours['name']})", ours)] + [(f"SpecForge {r['name']}", r) for r in sf]:
        rate = r["tokens_per_s"] * bytes_per_token
        vs_disk = f"{rate / disks[8]:.3f}" if 8 in disks and rate else "-"
        print(f"| {name} | {r['secs']:.2f} | {r['tokens_per_s']:,.0f} | {rate / 1e9:.3f} | {vs_disk} |")
    for writers, rate in sorted(disks.items()):
        print(f"| the disk, {writers} writers | | | {rate / 1e9:.3f} | {rate / disks.get(8, rate):.3f} |")
    print(f"INFO ours / SpecForge's best ({best['name']}): "
          f"{ours['tokens_per_s'] / best['tokens_per_s']:.3f}x (goal 3.0x)")
    return 0


def ckpt_files(path):
    return [os.path.join(d, f) for d, _s, fs in os.walk(path) for f in fs if f.endswith(".ckpt")]


def tokens_in(files):
    import torch  # pylint: disable=import-outside-toplevel
    return sum(torch.load(f, map_location="cpu", weights_only=True)["input_ids"].numel() for f in files)


def log_time(line):
    stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", line)
    return datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if stamp else None


def run_job(args):
    os.makedirs(args.work, exist_ok=True)
    cfg = dict(MARKERS, job=args.name, dataset=args.dataset, output_dir=args.out, dump_dir=args.dump,
               server_url=args.url, concurrency=args.concurrency, drain_workers=args.drain_workers,
               tokenizer_path=args.model, model_path=args.model, max_length=args.max_length,
               captured_layers=3, output_free_floor_bytes=2**30,
               output_free_resume_bytes=2 * 2**30, status_interval=1.0, shm_high=0.9,
               shm_low=0.7, host="gpu")
    cfg_path = os.path.join(args.work, f"{args.name}.json")
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "roles", "extraction_job", "files"), os.environ.get("PYTHONPATH", "")]))
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "eagle3_extraction_job", "run", "--config", cfg_path],
                          env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
    t_exit = time.time()
    with open(os.path.join(args.work, f"{args.name}.log"), "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)
    first = next((log_time(line) for line in proc.stdout.splitlines() if "resume:" in line), t0)
    files = ckpt_files(args.out)
    tokens = tokens_in(files)
    secs = t_exit - first
    print("\n".join("INFO job log: " + line for line in (proc.stdout + proc.stderr).splitlines()[-3:]))
    print(f"INFO job {args.name}: exit {proc.returncode}, {len(files)} .ckpt files, {tokens:,} tokens, "
          f"{secs:.2f} s from its first request to every file durable: {tokens / secs:,.0f} tokens/s "
          f"({first - t0:.1f} s start-up before)", flush=True)
    emit({"job": {"name": args.name, "rc": proc.returncode, "files": len(files),
                  "tokens": tokens, "secs": secs, "tokens_per_s": tokens / secs}})
    return proc.returncode


def fsync_tree(path):
    """fsync every file, then every dir, under path (what makes SpecForge's files durable)."""
    def sync(name, flags=os.O_RDONLY):
        fd = os.open(name, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    files = [os.path.join(d, f) for d, _s, fs in os.walk(path) for f in fs]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(sync, files))
    for d, _s, _f in os.walk(path):
        sync(d)


def run_specforge(args):
    os.makedirs(args.work, exist_ok=True)
    # torch.distributed.run under this interpreter: its workers are then this interpreter too
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1",
           "--master-port", str(args.master_port),
           os.path.join(ROOT, "lab", "gpu", "specforge_prepare.py"), args.script,
           "--target-model-path", args.model, "--data-path", args.dataset,
           "--output-path", args.out, "--draft-model-config", args.draft,
           "--chat-template", "qwen", "--max-length", str(args.max_length),
           "--cache-dir", os.path.join(args.work, "cache"),
           "--sglang-attention-backend", "triton", *args.extra]
    print("INFO specforge: prepare_hidden_states.py " + " ".join(cmd[8:]), flush=True)
    appeared = [None]
    stop = threading.Event()

    def watch():
        while not stop.is_set() and appeared[0] is None:
            if os.path.isdir(args.out) and any(n.startswith("rows_") for n in os.listdir(args.out)):
                appeared[0] = time.time()
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.time()
    with open(os.path.join(args.work, f"{args.name}.log"), "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout,
                              check=False)
    t_exit = time.time()
    stop.set()
    fsync_tree(args.out)
    t_durable = time.time()
    first = appeared[0] or t0
    files = ckpt_files(args.out)
    tokens = tokens_in(files)
    secs = t_durable - first
    with open(os.path.join(args.work, f"{args.name}.log"), encoding="utf-8") as log:
        lines = log.read().splitlines()
    for line in lines:
        if "layers" in line and ("Resolved" in line or "SPECFORGE_SGLANG_LAYERS_TO_CAPTURE" in line):
            print(f"INFO specforge {args.name}: {line.strip()}")
    if proc.returncode:
        print("\n".join("INFO specforge log: " + line for line in lines[-25:]))
    print(f"INFO specforge {args.name}: exit {proc.returncode}, {len(files)} .ckpt files, {tokens:,} "
          f"tokens, {t_exit - first:.2f} s from its first forward to its exit, {t_durable - t_exit:.2f} s "
          f"more to fsync: {tokens / secs:,.0f} tokens/s to durable files ({first - t0:.1f} s start-up "
          "before)", flush=True)
    emit({"specforge": {"name": args.name, "rc": proc.returncode, "files": len(files),
                        "tokens": tokens, "secs": secs, "tokens_per_s": tokens / secs,
                        "fsync_secs": t_durable - t_exit}})
    return proc.returncode


def run_disk(args):
    os.makedirs(args.path, exist_ok=True)
    block = os.urandom(1 << 22)
    count = max(1, args.bytes // args.file_bytes)
    dir_fd = os.open(args.path, os.O_RDONLY)

    def write(n):
        name = os.path.join(args.path, f"plain-{n}.bin")
        with open(name, "wb") as f:
            left = args.file_bytes
            while left > 0:
                left -= f.write(block[:min(left, len(block))])
            f.flush()
            os.fsync(f.fileno())
        os.fsync(dir_fd)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.writers) as pool:
        list(pool.map(write, range(count)))
    secs = time.perf_counter() - t0
    os.close(dir_fd)
    for n in range(count):
        os.unlink(os.path.join(args.path, f"plain-{n}.bin"))
    rate = count * args.file_bytes / secs
    print(f"INFO disk: {args.writers} writers, {count} files of {args.file_bytes / 1e6:.1f} MB "
          f"({count * args.file_bytes / 1e9:.1f} GB), each fsynced: {rate / 1e9:.2f} GB/s", flush=True)
    emit({"disk": {"writers": args.writers, "bytes": count * args.file_bytes,
                   "secs": secs, "bytes_per_s": rate}})
    return 0


def read_losses(path):
    """({step: training loss}, {step: eval loss}) from SpecForge's 'step N: {...}' lines:
    ``loss`` (the sample's loss, the draft's positions weighted as it trains them) and
    ``eval/avg_loss`` (the mean over the fixed eval set)."""
    train, evals = {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            match = re.match(r"step (\d+): (\{.*\})\s*$", line.strip())
            if not match:
                continue
            # the dict's repr: literal but for nan and inf, which become None and a huge number
            text = re.sub(r"\bnan\b", "None", re.sub(r"\binf\b", "1e999", match.group(2)))
            metrics = {k: float("nan") if v is None else v for k, v in ast.literal_eval(text).items()}
            step = int(match.group(1))
            if isinstance(metrics.get("loss"), float):
                train[step] = metrics["loss"]
            if isinstance(metrics.get("eval/avg_loss"), float):
                evals[step] = metrics["eval/avg_loss"]
    return train, evals


def moving_mean(curve, window):
    steps = sorted(curve)
    out = {}
    for i, step in enumerate(steps):
        last = steps[max(0, i - window + 1):i + 1]
        out[step] = sum(curve[t] for t in last) / len(last)
    return out


def falling(curve):
    """Finite, and the mean of its last fifth below the mean of its first fifth."""
    values = [curve[s] for s in sorted(curve)]
    finite = bool(values) and all(math.isfinite(v) for v in values)
    k = max(1, len(values) // 5)
    head, tail = (sum(values[:k]) / k, sum(values[-k:]) / k) if values else (0.0, 0.0)
    return {"points": len(values), "finite": finite, "first": head, "last": tail,
            "falling": finite and tail < head}


def run_losses(args):  # pylint: disable=too-many-locals
    runs = {label: read_losses(path) for label, path in zip(args.labels, args.logs)}
    window = args.window
    smooth = {label: moving_mean(train, window) for label, (train, _e) in runs.items()}
    eval_steps = sorted(set().union(*[set(e) for _t, e in runs.values()]))
    headers = [f"{label}: eval loss | {label}: training loss, mean of {window}" for label in args.labels]
    print("| step | " + " | ".join(headers) + " |")
    print("| ---: |" + " ---: | ---: |" * len(args.labels))
    for step in eval_steps:
        cells = []
        for label in args.labels:
            cells += [f"{runs[label][1].get(step, float('nan')):.4f}", f"{smooth[label].get(step, float('nan')):.4f}"]
        print(f"| {step} | " + " | ".join(cells) + " |")
    verdict = {}
    for label, (train, evals) in runs.items():
        verdict[label] = {"train": falling(train), "eval": falling(evals)}
        ok = verdict[label]["train"]["finite"] and verdict[label]["eval"]["falling"]
        print(f"{'PASS' if ok else 'FAIL'} {label}: {len(train)} steps, every loss finite: "
              f"{verdict[label]['train']['finite']}; eval loss {verdict[label]['eval']['first']:.4f} "
              f"-> {verdict[label]['eval']['last']:.4f}")
    if len(runs) == 2:
        (_a, ea), (_b, eb) = runs.values()
        common = sorted(set(ea) & set(eb))
        if common:
            gaps = [abs(ea[s] - eb[s]) for s in common]
            moves = [abs(ea[common[-1]] - ea[common[0]]), abs(eb[common[-1]] - eb[common[0]])]
            print(f"INFO eval loss: the two runs differ by {max(gaps):.4f} at most, {gaps[-1]:.4f} at "
                  f"step {common[-1]}; each moved {moves[0]:.4f} and {moves[1]:.4f} over the run")
            verdict["eval_gap"] = gaps
    if args.png:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
        for label, (train, evals) in runs.items():
            top.plot(sorted(smooth[label]), [smooth[label][s] for s in sorted(smooth[label])], label=label)
            bottom.plot(sorted(evals), [evals[s] for s in sorted(evals)], marker="o", label=label)
        top.set_ylabel(f"training loss\n(mean of {window} steps)")
        bottom.set_ylabel("eval loss\n(the same fixed set)")
        bottom.set_xlabel("optimizer step")
        top.set_title("SpecForge EAGLE-3 offline training: the same draft, seed and eval set")
        top.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
    print(json.dumps({"losses": verdict}))
    ok = all(v["train"]["finite"] and v["eval"]["falling"] for k, v in verdict.items() if k in runs)
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("job", "specforge"):
        p = sub.add_parser(name)
        p.add_argument("--name", required=True)
        p.add_argument("--model", required=True)
        p.add_argument("--dataset", required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--work", required=True)
        p.add_argument("--max-length", type=int, default=4096)
        p.add_argument("--timeout", type=int, default=1200)
    job = sub.choices["job"]
    job.add_argument("--url", required=True)
    job.add_argument("--dump", required=True)
    job.add_argument("--concurrency", type=int, default=16)
    job.add_argument("--drain-workers", type=int, default=4)
    spf = sub.choices["specforge"]
    spf.add_argument("--script", required=True)
    spf.add_argument("--draft", required=True)
    spf.add_argument("--master-port", type=int, default=29511)
    spf.add_argument("extra", nargs="*", help="more arguments of prepare_hidden_states.py (after --)")
    disk = sub.add_parser("disk")
    disk.add_argument("--path", required=True)
    disk.add_argument("--bytes", type=int, required=True)
    disk.add_argument("--file-bytes", type=int, required=True)
    disk.add_argument("--writers", type=int, default=8)
    losses = sub.add_parser("losses")
    losses.add_argument("--logs", nargs=2, required=True)
    losses.add_argument("--labels", nargs=2, required=True)
    losses.add_argument("--png", default="")
    losses.add_argument("--window", type=int, default=20, help="steps in the training loss's moving mean")
    summary = sub.add_parser("summary")
    summary.add_argument("--record", required=True, help="the file $SIDE_BY_SIDE_RECORD named")
    summary.add_argument("--bytes", type=int, default=0, help="bytes of our output (for GB/s)")
    args = parser.parse_args()
    return {"job": run_job, "specforge": run_specforge, "disk": run_disk, "losses": run_losses,
            "summary": run_summary}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
