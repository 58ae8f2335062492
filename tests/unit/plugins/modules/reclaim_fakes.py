"""What the tests of port_reclaim and process_reclaim share: made-up processes as procfs describes
them, a server whose command line holds an API key and init (conftest.py has their `signals` fixture)."""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs

SECRET = 'sk-live-0123456789'
PORT = 30000


def proc(pid, cmdline, ppid=1, state='S', nspid=None, kernel_thread=False):
    name = cmdline[0].rsplit('/', 1)[-1][:15] if cmdline else 'kthread'
    return procfs.Process(pid=pid, ppid=ppid, state=state, name=name, cmdline=cmdline, starttime=1000 + pid,
                          kernel_thread=kernel_thread, uid=0, nspid=nspid or [pid])


SERVER = proc(4242, ['python3', '-m', 'sglang.launch_server', '--port', str(PORT), '--api-key', SECRET])
INIT = proc(1, ['/sbin/init'], ppid=0)
