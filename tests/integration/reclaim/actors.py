"""Real processes in the shapes that leave a port or a GPU held: the actors of the
reclaim tests (and of benchmarks/reclaim_bench.py).

Each command writes a JSON "ready" file once everything is in place, with the
pids that matter, then sleeps until killed. Titles are set the way
setproctitle does it (SGLang uses setproctitle): prctl(PR_SET_NAME) for
/proc/<pid>/comm and an overwrite of the argv area for /proc/<pid>/cmdline.

  actors.py listen --ready F --port P [--host H] [--v6only] [--ignore-term]
                   [--children N] [--daemon] [--title T]
  actors.py sglang-tree --ready F --port P [--tp N] [--ignore-term-ranks] [--orphan]
  actors.py zombie --ready F --parent-title T --child-title T2
  actors.py hold-fd --ready F --path PATH [--title T] [--ignore-term]
"""

import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import time

PR_SET_NAME = 15


def set_title(title):
    """Set comm (15 chars) and rewrite /proc/self/cmdline to title."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, title.encode()[:15], 0, 0, 0)
    with open('/proc/self/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    # stat fields 48 and 49 (1-based): arg_start, arg_end; fields[0] is field 3
    arg_start, arg_end = int(fields[45]), int(fields[46])
    size = arg_end - arg_start
    data = title.encode()[:size - 1]
    with open('/proc/self/mem', 'r+b', buffering=0) as mem:
        mem.seek(arg_start)
        mem.write(data + b'\0' * (size - len(data)))


def write_ready(path, info):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(info, f)
    os.rename(tmp, path)


def sleep_forever():
    while True:
        time.sleep(3600)


def make_listener(host, port, v6only):
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if v6only else 0)
    sock.bind((host, port))
    sock.listen(16)
    sock.set_inheritable(True)
    return sock


def daemonize():
    """The classic double fork: the caller's process exits, the grandchild runs
    in a new session, reparented to init. Returns in the grandchild only."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)


def fork_child(body):
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    return pid


def cmd_listen(args):
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    origin = os.getpid()
    if args.daemon:
        # the launcher's pid exits at once: the holder is the orphaned grandchild
        daemonize()
    if args.title:
        set_title(args.title)
    sock = make_listener(args.host, args.port, args.v6only)
    pids = [os.getpid()]
    for dummy in range(args.children):
        pids.append(fork_child(sleep_forever))
    write_ready(args.ready, {'pids': pids, 'port': sock.getsockname()[1], 'origin': origin,
                             'sid': os.getsid(0), 'pgid': os.getpgid(0)})
    sleep_forever()


def cmd_sglang_tree(args):
    """What `python -m sglang.launch_server --tp N` leaves: the launcher holds
    the HTTP port, scheduler_TP<n> children (which ignore SIGTERM with
    --ignore-term-ranks) and a detokenizer. With --orphan the launcher dies
    first and the children are reparented to init, as in sglang #23627."""
    sock = make_listener('127.0.0.1', args.port, False)
    children = {}

    def scheduler(rank):
        def body():
            sock.close()
            if args.ignore_term_ranks:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            set_title('sglang::scheduler_TP%d' % rank)
            sleep_forever()
        return body

    def detokenizer():
        sock.close()
        set_title('sglang::detokenizer')
        sleep_forever()

    if args.orphan:
        # an intermediate process that dies: its children end up under init
        read_end, write_end = os.pipe()
        middle = os.fork()
        if middle == 0:
            os.close(read_end)
            for rank in range(args.tp):
                children['scheduler_TP%d' % rank] = fork_child(scheduler(rank))
            children['detokenizer'] = fork_child(detokenizer)
            os.write(write_end, json.dumps(children).encode())
            os._exit(0)
        os.close(write_end)
        children = json.loads(os.read(read_end, 4096).decode())
        os.waitpid(middle, 0)
        sock.close()
        write_ready(args.ready, {'launcher': None, 'children': children, 'port': args.port})
        os._exit(0)
    for rank in range(args.tp):
        children['scheduler_TP%d' % rank] = fork_child(scheduler(rank))
    children['detokenizer'] = fork_child(detokenizer)
    write_ready(args.ready, {'launcher': os.getpid(), 'children': children, 'port': args.port})
    sleep_forever()


def cmd_zombie(args):
    """A parent that never reaps: its child exits and stays in state Z."""
    set_title(args.parent_title)

    def child():
        set_title(args.child_title)

    child_pid = fork_child(child)
    # wait for the child to be a zombie (it exits right away)
    for dummy in range(200):
        with open('/proc/%d/stat' % child_pid) as f:
            if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                break
        time.sleep(0.01)
    write_ready(args.ready, {'parent': os.getpid(), 'zombie': child_pid})
    sleep_forever()


def cmd_hold_fd(args):
    """Keep a file (a device node such as /dev/nvidia0) open."""
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.title:
        set_title(args.title)
    fd = os.open(args.path, os.O_RDONLY)
    write_ready(args.ready, {'pid': os.getpid(), 'fd': fd})
    sleep_forever()


def main(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('listen')
    p.add_argument('--ready', required=True)
    p.add_argument('--port', type=int, default=0)
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--v6only', action='store_true')
    p.add_argument('--ignore-term', action='store_true')
    p.add_argument('--children', type=int, default=0)
    p.add_argument('--daemon', action='store_true')
    p.add_argument('--title')
    p = sub.add_parser('sglang-tree')
    p.add_argument('--ready', required=True)
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--tp', type=int, default=2)
    p.add_argument('--ignore-term-ranks', action='store_true')
    p.add_argument('--orphan', action='store_true')
    p = sub.add_parser('zombie')
    p.add_argument('--ready', required=True)
    p.add_argument('--parent-title', required=True)
    p.add_argument('--child-title', required=True)
    p = sub.add_parser('hold-fd')
    p.add_argument('--ready', required=True)
    p.add_argument('--path', required=True)
    p.add_argument('--title')
    p.add_argument('--ignore-term', action='store_true')
    args = parser.parse_args(argv)
    {'listen': cmd_listen, 'sglang-tree': cmd_sglang_tree, 'zombie': cmd_zombie,
     'hold-fd': cmd_hold_fd}[args.cmd](args)


if __name__ == '__main__':
    main(sys.argv[1:])
