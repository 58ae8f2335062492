"""Benchmark of the reclaim modules (root; Linux).

1. Scan: the time to read a process table of --sleepers (default 2,000) extra
   processes. The sleepers are forked inside a PID namespace of their own
   (unshare --kill-child), so killing one process tears them all down, whatever
   happens here; they are seen from the host like any process. Measured: the
   whole-table read of module_utils (procfs.snapshot), the fd scan port_reclaim
   does (socket inodes of every process), and the modules' own `elapsed` for a
   check-mode run of process_reclaim and port_reclaim through Ansible.
2. Reclaim: a listener that ignores SIGTERM, freed by port_reclaim through
   Ansible with signal_timeout=S; goal: the module's elapsed within S + 1 s.

Usage: .venv/bin/python benchmarks/reclaim_bench.py [--sleepers N] [--signal-timeout S] [--json FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, '.ansible', 'collections'))
sys.path.insert(0, os.path.join(REPO, 'tests', 'integration', 'reclaim'))

from ansible_collections.eagle3.extraction.plugins.module_utils import procfs  # noqa: E402
from conftest import Sandbox  # noqa: E402  (the reclaim tests' namespace sandbox)

MAX_SLEEPERS = 10000

SPAWNER = r'''
import os, sys, time
n = int(sys.argv[1])
for dummy in range(n):
    if os.fork() == 0:
        os.execv('/bin/sleep', ['sleep', '600'])
print('spawned', flush=True)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(1)
'''


def timed(func, repeat):
    runs = []
    result = None
    for dummy in range(repeat):
        began = time.perf_counter()
        result = func()
        runs.append(time.perf_counter() - began)
    return statistics.median(runs), min(runs), result


def fd_scan():
    count = 0
    for pid in procfs.list_pids():
        count += len(procfs.socket_inodes(pid))
    return count


def host_listener(workdir):
    """A listener on the host (not in any sandbox): the target of port_reclaim's
    check-mode scan. Returns (process, port)."""
    ready = os.path.join(workdir, 'host-listener.json')
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, 'tests', 'integration', 'reclaim', 'actors.py'),
                             'listen', '--port', '0', '--ready', ready])
    deadline = time.monotonic() + 10
    while not os.path.exists(ready):
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit('the host listener did not start')
        time.sleep(0.01)
    with open(ready) as f:
        return proc, json.load(f)['port']


def bench_scan(sleepers, workdir):
    before = len(procfs.list_pids())
    listener, port = host_listener(workdir)
    spawner = subprocess.Popen(['unshare', '--pid', '--fork', '--kill-child', sys.executable, '-c', SPAWNER,
                                str(sleepers)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = spawner.stdout.readline()
        if line.strip() != 'spawned':
            raise SystemExit('the sleepers did not start')
        deadline = time.monotonic() + 30
        while len(procfs.list_pids()) < before + sleepers and time.monotonic() < deadline:
            time.sleep(0.1)
        total = len(procfs.list_pids())
        snap_median, snap_min, snap = timed(procfs.snapshot, 5)
        fd_median, fd_min, dummy = timed(fd_scan, 5)
        # the modules' own elapsed, through Ansible, on the host: check mode only
        process_check = host_ansible('eagle3.extraction.process_reclaim', {'match': [r'^no-such-process-\d+$']})
        port_check = host_ansible('eagle3.extraction.port_reclaim', {'port': port})
        if port_check.get('failed') or port_check['would_kill'] != [listener.pid]:
            raise SystemExit('port_reclaim check mode did not find the listener: %s' % port_check.get('msg'))
        return {
            'processes_in_table': total,
            'sleepers': sleepers,
            'snapshot_s_median': round(snap_median, 4),
            'snapshot_s_min': round(snap_min, 4),
            'snapshot_processes': len(snap),
            'fd_scan_s_median': round(fd_median, 4),
            'fd_scan_s_min': round(fd_min, 4),
            'process_reclaim_check_elapsed_s': process_check['elapsed'],
            'port_reclaim_check_elapsed_s': port_check['elapsed'],
        }
    finally:
        os.killpg(spawner.pid, 9)
        spawner.wait()
        listener.kill()
        listener.wait()


def host_ansible(module, args):
    """Check mode only: on the host, nothing may be signalled."""
    env = dict(os.environ, PATH=os.path.join(REPO, '.venv', 'bin') + ':' + os.environ['PATH'],
               ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.posix.json')
    proc = subprocess.run(['ansible', 'localhost', '-i', 'localhost,', '-c', 'local', '-m', module,
                           '-a', json.dumps(args), '--check'], capture_output=True, text=True, env=env, cwd=REPO,
                          check=False)
    return json.loads(proc.stdout)['plays'][0]['tasks'][0]['hosts']['localhost']


def bench_reclaim(box, signal_timeout):
    holder = box.actor('listen', '--port', '8000', '--ignore-term')
    began = time.monotonic()
    result = box.ansible('eagle3.extraction.port_reclaim', {'port': 8000, 'signal_timeout': signal_timeout})
    wall = time.monotonic() - began
    if result.get('failed') or not result['port_free']:
        raise SystemExit('reclaim failed: %s' % result.get('msg'))
    return {
        'signal_timeout_s': signal_timeout,
        'module_elapsed_s': result['elapsed'],
        'over_signal_timeout_s': round(result['elapsed'] - signal_timeout, 3),
        'ansible_wall_s': round(wall, 3),
        'signals': [k['signal'] for k in result['killed']],
        'holder_pid': holder['pids'][0],
        'goal_met': result['elapsed'] <= signal_timeout + 1,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sleepers', type=int, default=2000)
    parser.add_argument('--signal-timeout', type=float, default=2.0)
    parser.add_argument('--json', help='also write the figures to this file')
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit('run as root (namespaces, signals)')
    if not 1 <= args.sleepers <= MAX_SLEEPERS:
        raise SystemExit('--sleepers must be between 1 and %d' % MAX_SLEEPERS)

    with tempfile.TemporaryDirectory() as workdir:
        scan = bench_scan(args.sleepers, workdir)
        box = Sandbox(workdir)
        try:
            reclaim_figures = bench_reclaim(box, args.signal_timeout)
        finally:
            box.close()
    figures = {'scan': scan, 'reclaim': reclaim_figures, 'kernel': os.uname().release, 'cpus': os.cpu_count()}
    print(json.dumps(figures, indent=1))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(figures, f, indent=1)
    if not reclaim_figures['goal_met']:
        sys.exit(1)


if __name__ == '__main__':
    main()
