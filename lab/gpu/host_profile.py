"""Where the host's CPUs go while the job drives a server (issue 21), sampled from /proc.

A thread reads /proc/<pid>/task/<tid>/stat (user + system CPU) and .../schedstat (time
spent waiting on a run queue: the CPU a thread wanted and did not get) of every thread
every --interval seconds, and /proc/stat for the whole machine. Each thread counts from
the first sample it was seen in (a thread born later counts from its birth), up to the
last sample it was seen in, so processes that end during the phase (the job) are counted.
Threads are grouped by what they belong to:

  sglang scheduler main   the scheduler's Python thread (launches the GPU's work)
  sglang scheduler other  its other threads (the capture's writers and dispatcher, ...)
  sglang other            the HTTP / tokenizer process, the detokenizer
  job main                the job's event loop (sends the requests, reads the answers)
  job other               its drain, hash and commit threads
  client                  this bench's own process (the bare client's threads)
  kernel                  kernel threads (writeback, kswapd, ...)
  other                   the rest

Used by job_bench.py around each phase (``Sampler``); alone:
    python3 lab/gpu/host_profile.py --seconds 10
Standard library only; Linux.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
GROUPS = ("sglang scheduler main", "sglang scheduler other", "sglang other", "job main",
          "job other", "client", "kernel", "other")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _proc_kind(pid, me):
    """What a process is, from its cmdline (sglang renames its children: sglang::...)."""
    if pid == me:
        return "client"
    raw = _read(f"/proc/{pid}/cmdline")
    if raw is None:
        return None
    if not raw:
        return "kernel"
    cmd = raw.replace(b"\0", b" ").decode(errors="replace")
    if cmd.startswith("sglang::scheduler"):
        return "sglang scheduler"
    if cmd.startswith("sglang::") or "sglang.launch_server" in cmd:
        return "sglang other"
    if "eagle3_extraction_job" in cmd:
        return "job"
    return "other"


def _thread_times(pid, tid):
    """(cpu seconds, run-queue wait seconds) of one thread, or None once it is gone."""
    stat = _read(f"/proc/{pid}/task/{tid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK        # utime, stime (fields 14, 15)
    sched = _read(f"/proc/{pid}/task/{tid}/schedstat")
    wait = int(sched.split()[1]) / 1e9 if sched else 0.0
    return cpu, wait


def _machine():
    """(busy seconds, iowait seconds, idle seconds) of all CPUs together, from /proc/stat."""
    line = _read("/proc/stat").split(b"\n", 1)[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) / TICK for v in line[:8])
    return user + nice + system + irq + softirq + steal, iowait, idle


class Sampler:
    """Samples /proc on a thread between ``start()`` and ``stop()``; ``stop`` returns the summary."""

    def __init__(self, interval=0.1):
        self.interval = interval
        self.me = os.getpid()
        self.kinds = {}          # pid -> kind
        self.first = {}          # (pid, tid) -> (cpu, wait) when first seen
        self.last = {}           # (pid, tid) -> (cpu, wait) when last seen
        self.born_after_start = set()
        self.samples = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()    # one sample at a time; none while summing
        self._thread = None
        self._t0 = self._m0 = None

    def _sample(self, initial=False):
        with self._lock:
            self._sample_locked(initial)

    def _sample_locked(self, initial):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid not in self.kinds:
                self.kinds[pid] = _proc_kind(pid, self.me)
            if self.kinds[pid] is None:
                continue
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for t in tids:
                key = (pid, int(t))
                times = _thread_times(pid, t)
                if times is None:
                    continue
                if key not in self.first:
                    # a thread first seen after the start was born during the phase: all of it counts
                    self.first[key] = times if initial else (0.0, 0.0)
                    if not initial:
                        self.born_after_start.add(key)
                self.last[key] = times
        self.samples += 1

    def _loop(self):
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self):
        self._t0, self._m0 = time.monotonic(), _machine()
        self._sample(initial=True)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="host-profile")
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.summary()

    def summary(self):
        """What was used from ``start()`` until now (the sampling goes on until ``stop``)."""
        with self._lock:
            self._sample_locked(False)
            return self._sum()

    def _sum(self):
        secs = time.monotonic() - self._t0
        m1 = _machine()
        busy, iowait, idle = (b - a for a, b in zip(self._m0, m1))
        groups = {g: {"cpu_s": 0.0, "wait_s": 0.0, "threads": 0} for g in GROUPS}
        for key, (cpu1, wait1) in self.last.items():
            pid, tid = key
            kind = self.kinds[pid]
            cpu0, wait0 = self.first[key]
            if kind in ("sglang scheduler", "job"):
                group = f"{kind} {'main' if pid == tid else 'other'}"
            else:
                group = kind
            if cpu1 - cpu0 <= 0 and wait1 - wait0 <= 0:
                continue
            g = groups[group]
            g["cpu_s"] += cpu1 - cpu0
            g["wait_s"] += wait1 - wait0
            g["threads"] += 1
        groups = {name: g for name, g in groups.items() if g["threads"]}
        for g in groups.values():
            g["cores"] = round(g["cpu_s"] / secs, 2)
            g["cpu_s"] = round(g["cpu_s"], 2)
            g["wait_s"] = round(g["wait_s"], 3)
        return {"seconds": round(secs, 2), "samples": self.samples, "cpus": os.cpu_count(),
                "busy_cores": round(busy / secs, 2), "iowait_cores": round(iowait / secs, 2),
                "idle_cores": round(idle / secs, 2), "groups": groups}


def report(phase, summary):
    """Lines for a log: the machine, then each group that used CPU or waited for it."""
    lines = [f"INFO host {phase}: {summary['seconds']} s, {summary['cpus']} CPUs: "
             f"{summary['busy_cores']} busy, {summary['iowait_cores']} in iowait, "
             f"{summary['idle_cores']} idle (cores on average)"]
    for name, g in summary["groups"].items():
        if g["cpu_s"] or g["wait_s"]:
            lines.append(f"INFO host {phase}:   {name:24s} {g['cores']:6.2f} cores "
                         f"({g['cpu_s']:.2f} CPU s), waited for a CPU {g['wait_s']:.3f} s, "
                         f"{g['threads']} threads")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()
    sampler = Sampler(args.interval).start()
    time.sleep(args.seconds)
    summary = sampler.stop()
    print(report("sample", summary))
    print(json.dumps({"host_profile": summary}))


if __name__ == "__main__":
    main()
