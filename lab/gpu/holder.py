"""A GPU-memory holder for the real GPU proofs: allocates MiB (argv[1]) on every GPU, or
on the GPUs listed in $HOLDER_GPUS (comma-separated indices), ignores SIGTERM, and
sleeps until killed (as an orphaned SGLang scheduler does)."""
import os
import signal
import sys
import time

import torch

signal.signal(signal.SIGTERM, signal.SIG_IGN)
n = int(sys.argv[1]) * 2**20
wanted = os.environ.get("HOLDER_GPUS", "all")
gpus = range(torch.cuda.device_count()) if wanted == "all" else [int(i) for i in wanted.split(",")]
held = [torch.empty(n, dtype=torch.uint8, device="cuda:%d" % i) for i in gpus]
for i in gpus:
    torch.cuda.synchronize(i)
print("holding pid=%d gpus=%s mib=%s" % (os.getpid(), ",".join(map(str, gpus)), sys.argv[1]), flush=True)
while True:
    time.sleep(3600)
