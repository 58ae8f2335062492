"""PID 1 of a reclaim test sandbox: adopts and reaps every orphan, as a real
init (or systemd in an LXC container) does, until the sandbox is torn down."""

import os
import time

while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(0.02)
