"""The extraction job against a bare client, on one real SGLang server with the capture on
(lab/gpu/capture_real_sglang.sh jobbench).

The same prompts (--prompts of --tokens token ids) go to the server twice, after a
warm-up round:
  bare  capture_client's way: --concurrency requests at a time, time until every
        request is answered (its dumps are left in /dev/shm, then removed untimed)
  job   python -m eagle3_extraction_job run with the same concurrency, two figures:
        served: from the job's first request (its "sending" line, read as it is
        printed) until the last dump appeared (the server's prompt tokens/s while the
        job drives it: the goal's measure)
        durable: from its first request to its "complete:" line, when every sample is
        a .ckpt on the output disk, fsynced and in the manifest (what a user waits for;
        the process's exit after it is shown apart)
Prints prompt tokens/s of both, the ratio, and the output disk's own fsynced write
rate for the same bytes, as JSON on the last line. The host's CPUs are sampled from
/proc during the measured bare round, the job's serving and the whole job
(host_profile.py: CPU used and time spent waiting for a CPU, by process and thread).

--job-variants runs the job once per variant, each into an empty output dir:
  plain  the job as it is
  nice   the job's threads other than its event loop (drain, hash, manifest commit)
         reniced to +10 from here as they appear, so that sglang's processes get the CPUs
         first when the host has too few: whether that is worth doing in the job itself
  MODE[:MiB][+beside]  the job with its drain writing that way (buffered, early, stream,
         direct, early+beside...: eagle3_extraction_job.drain.set_write_variant;
         job_write_mode.py), to compare with its default
A bare round after the job rounds shows how far the server drifted meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from capture_client import generate, prompt, wait_files
from host_profile import Sampler, report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROFILES = {}   # phase -> host_profile summary


def bare_round(args, tag):
    rids = [f"bare{tag}-{i}" for i in range(args.prompts)]
    ids = {rid: prompt(f"jb-{i}", args.tokens) for i, rid in enumerate(rids)}
    sampler = Sampler(args.profile_interval).start()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        codes = list(pool.map(lambda rid: generate(args.url, rid, ids[rid])[0], rids))
    secs = time.perf_counter() - t0
    if tag == "measured":
        PROFILES["bare client"] = sampler.stop()
    else:
        sampler.stop()
    wait_files(args.dump, rids, timeout=300)
    for rid in rids:
        try:
            os.unlink(os.path.join(args.dump, rid + ".pt"))
        except FileNotFoundError:
            pass
    print(f"INFO bare {tag}: {args.prompts * args.tokens / secs:,.0f} prompt tokens/s "
          f"({codes.count(200)}/{len(codes)} 200, {secs:.2f} s)", flush=True)
    return args.prompts * args.tokens / secs


def log_time(line):
    stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", line)
    return datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if stamp else None


def renice_threads(pid, nice, stop):
    """Every thread of ``pid`` but its first (the job's event loop) to ``nice``, as they appear."""
    done = set()
    while not stop.is_set():
        try:
            tids = {int(t) for t in os.listdir(f"/proc/{pid}/task")} - {pid} - done
        except OSError:
            return
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass
            done.add(tid)
        time.sleep(0.01)


def job_run(args, variant="plain"):
    if os.path.isdir(args.out):   # each variant starts from an empty output dir
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    os.makedirs(args.work, exist_ok=True)
    dataset = os.path.join(args.work, "dataset.jsonl")
    with open(dataset, "w", encoding="utf-8") as f:
        for i in range(args.prompts):
            ids = prompt(f"jb-{i}", args.tokens)
            f.write(json.dumps({"id": f"s{i}", "input_ids": ids,
                                "loss_mask": [0] * 16 + [1] * (len(ids) - 16)}) + "\n")
    cfg = {"job": "jobbench", "dataset": dataset, "output_dir": args.out, "dump_dir": args.dump,
           "server_url": args.url, "concurrency": args.concurrency,
           "drain_workers": args.drain_workers, "hidden_size": args.hidden,
           "captured_layers": args.aux, "output_free_floor_bytes": 2**30,
           "output_free_resume_bytes": 2 * 2**30, "status_interval": 1.0, "shm_high": 0.9,
           "shm_low": 0.7, "host": "gpu"}
    cfg_path = os.path.join(args.work, "job.json")
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "roles", "extraction_job", "files"), os.environ.get("PYTHONPATH", "")]))
    seen, last_seen, stop = set(), [0.0], threading.Event()
    sampler = [None]

    def watch():  # a dump appears when its prompt's prefill ends, before the 200
        while not stop.is_set():
            names = {n for n in os.listdir(args.dump) if n.startswith("jobbench-") and n.endswith(".pt")}
            if names - seen:
                seen.update(names)
                last_seen[0] = time.time()
                if len(seen) == args.prompts and sampler[0] is not None:
                    PROFILES[f"job {variant} serving"] = sampler[0].summary()
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.time()
    # a variant named after a write mode runs the job with its drain in that mode
    command = ([args.python, "-m", "eagle3_extraction_job"] if variant in ("plain", "nice") else
               [args.python, os.path.join(HERE, "job_write_mode.py"), variant])
    proc = subprocess.Popen(command + ["run", "--config", cfg_path],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if variant == "nice":
        threading.Thread(target=renice_threads, args=(proc.pid, 10, stop), daemon=True).start()
    lines, first = [], None
    for line in proc.stdout:   # read as printed: the first request is the "sending" line's moment
        lines.append(line.rstrip("\n"))
        if first is None and " sending " in line:
            first = log_time(line) or time.time()
            sampler[0] = Sampler(args.profile_interval).start()
    proc.wait(timeout=1200)
    t_exit = time.time()
    stop.set()
    watcher.join()
    if sampler[0] is not None:
        PROFILES[f"job {variant} to durable"] = sampler[0].stop()
    with open(os.path.join(args.work, f"job-{variant}.log"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    if first is None:   # a job without the line (older code): its "resume:" line's time
        first = next((log_time(line) for line in lines if "resume:" in line), t0)
    print("\n".join("INFO job log: " + line for line in lines[-4:]), flush=True)
    tokens = args.prompts * args.tokens
    served = tokens / (last_seen[0] - first) if len(seen) == args.prompts else 0.0
    # every file is durable and recorded when the job logs "complete:" (its card written);
    # the interpreter's exit after it (torch's teardown: 0.4 s on the 2-core machine) is not
    done_at = next((log_time(line) for line in lines if " complete: " in line), None) or t_exit
    durable = tokens / (done_at - first)
    print(f"INFO job {variant}: exit {proc.returncode}; served {served:,.0f} prompt tokens/s ({len(seen)} "
          f"dumps seen, the last {last_seen[0] - first:.2f} s after its first request); durable "
          f"{durable:,.0f} prompt tokens/s ({done_at - first:.2f} s to every file durable and "
          f"recorded; {first - t0:.1f} s start-up before, {t_exit - done_at:.2f} s exit after)",
          flush=True)
    return proc.returncode, served, durable


def disk_rate(path, total, writers=1):
    """The output disk's own rate for the same bytes: files of one sample's size, each
    fsynced and the dir fsynced after it, from ``writers`` threads at once (as many as
    the drain has workers: the goal compares with the disk's parallel rate)."""
    block = os.urandom(1 << 24)
    count = -(-total // (7 << 24))  # 112 MiB files: one 2,048-token sample at 57,344 B a token

    def write(n):
        name = os.path.join(path, f"plain-{n}.bin")
        with open(name, "wb") as f:
            f.writelines([block] * 7)
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(count)))
    secs = time.perf_counter() - t0
    for i in range(count):
        os.unlink(os.path.join(path, f"plain-{i}.bin"))
    return count * (7 << 24) / secs


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--drain-workers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--aux", type=int, default=3)
    parser.add_argument("--job-variants", default="plain",
                        help="comma-separated: plain, nice, or a write variant (see above)")
    parser.add_argument("--profile-interval", type=float, default=0.2,
                        help="seconds between two samples of /proc (host_profile.py)")
    args = parser.parse_args()
    bare_round(args, "warm")
    bare = bare_round(args, "measured")
    runs = {}
    for variant in args.job_variants.split(","):
        rc, job, durable = job_run(args, variant)
        out_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(args.out)
                        for f in fs if f.endswith(".ckpt"))
        ckpts = sum(f.endswith(".ckpt") for _d, _s, fs in os.walk(args.out) for f in fs)
        runs[variant] = {"rc": rc, "job": job, "ratio": job / bare, "durable": durable,
                         "ckpts": ckpts, "out_bytes": out_bytes}
    bare_after = bare_round(args, "after")
    disk1 = disk_rate(args.out, min(out_bytes, 8 << 30))
    disk = disk_rate(args.out, min(out_bytes, 8 << 30), args.drain_workers)
    for variant, r in runs.items():
        r["to_disk"] = r["out_bytes"] * r["durable"] / (args.prompts * args.tokens) / disk
        # three decimals: the goals are 0.95 and 0.90, and 0.947 is not 0.95
        print(f"INFO job {variant}: served {r['job']:,.0f} prompt tokens/s, {r['ratio']:.3f} of the "
              f"bare client's {bare:,.0f} ({bare_after:,.0f} after the job rounds, "
              f"{r['job'] / bare_after:.3f} of that); to durable files {r['durable']:,.0f} prompt "
              f"tokens/s, {r['to_disk']:.3f} of the disk's {args.drain_workers}-writer rate", flush=True)
    print(f"INFO output: {ckpts} .ckpt files, {out_bytes / 1e9:.2f} GB; the output disk's own "
          f"fsynced write rate {disk1 / 1e9:.2f} GB/s from one writer, {disk / 1e9:.2f} GB/s from "
          f"{args.drain_workers} (the goal's measure)", flush=True)
    for phase, summary in PROFILES.items():
        print(report(phase, summary), flush=True)
    ok = all(r["rc"] == 0 and r["ckpts"] == args.prompts for r in runs.values())
    for variant, r in runs.items():
        print(f"{'PASS' if r['rc'] == 0 and r['ckpts'] == args.prompts else 'FAIL'} the job "
              f"({variant}) finished every sample ({r['ckpts']}/{args.prompts}, exit {r['rc']})")
    first = next(iter(runs.values()))
    print(json.dumps({"jobbench": {"bare": bare, "bare_after": bare_after, "job": first["job"],
                                   "ratio": first["ratio"], "durable": first["durable"],
                                   "disk_gbps": disk / 1e9, "disk_1_gbps": disk1 / 1e9,
                                   "disk_writers": args.drain_workers, "to_disk": first["to_disk"],
                                   "out_gb": out_bytes / 1e9, "prompts": args.prompts,
                                   "variants": runs, "host": PROFILES}}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
