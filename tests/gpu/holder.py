"""A GPU-memory holder for the real GPU proofs: allocates MiB (argv[1]) on every GPU,
ignores SIGTERM, and sleeps until killed (as an orphaned SGLang scheduler does)."""
import os
import signal
import sys
import time

import torch

signal.signal(signal.SIGTERM, signal.SIG_IGN)
n = int(sys.argv[1]) * 2**20
held = [torch.empty(n, dtype=torch.uint8, device="cuda:%d" % i) for i in range(torch.cuda.device_count())]
for i in range(torch.cuda.device_count()):
    torch.cuda.synchronize(i)
print("holding pid=%d gpus=%d mib=%s" % (os.getpid(), len(held), sys.argv[1]), flush=True)
while True:
    time.sleep(3600)
