"""Multi-node tensor parallelism, as `--nnodes N --node-rank R --dist-init-addr HOST:PORT` look from outside.

Rank 0 listens on the dist-init port (as torch.distributed's TCPStore does) and is not healthy until every
other rank has connected and said the same nnodes and tp-size; a rank that says otherwise is refused and
exits 1 with a RuntimeError, as SGLang's launcher does when the ranks' settings disagree. A peer that goes
away afterwards leaves rank 0 unhealthy (503) for good, as a real server hangs in NCCL; a rank whose rank 0
goes away exits 1 ("NCCL error"). Ranks other than 0 serve no HTTP, as in SGLang.

Env: SGLANG_STANDIN_DIST_TIMEOUT (seconds a rank tries to reach rank 0, default 120).
"""

import json
import os
import socket
import sys
import threading
import time


def add_arguments(parser):
    parser.add_argument('--nnodes', type=int, default=1)
    parser.add_argument('--node-rank', dest='node_rank', type=int, default=0)
    parser.add_argument('--dist-init-addr')


def check_args(args):
    """SGLang's refusals of the flags alone: a message, or None."""
    if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        return 'ValueError: node_rank=%d is not in [0, nnodes=%d)' % (args.node_rank, args.nnodes)
    if args.nnodes > 1 and not args.dist_init_addr:
        return 'ValueError: --dist-init-addr is required when nnodes > 1'
    if args.tp_size % args.nnodes:
        return 'ValueError: tp_size=%d must be divisible by nnodes=%d' % (args.tp_size, args.nnodes)
    return None


def _address(args):
    host, port = args.dist_init_addr.rsplit(':', 1)
    return host.strip('[]'), int(port)


def _hello(args):
    return {'node_rank': args.node_rank, 'nnodes': args.nnodes, 'tp_size': args.tp_size}


class Rendezvous(object):
    """Rank 0's side: accepts the other ranks on the dist-init port."""

    def __init__(self, args, state, log):
        self.args, self.state, self.log = args, state, log
        self.joined = {}
        self.lost = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('0.0.0.0', _address(args)[1]))
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def complete(self):
        return not self.lost and len(self.joined) == self.args.nnodes - 1

    def _accept(self):
        while True:
            conn, peer = self.sock.accept()
            threading.Thread(target=self._peer, args=(conn, peer), daemon=True).start()

    def _peer(self, conn, peer):
        reader = conn.makefile('r')
        try:
            hello = json.loads(reader.readline() or '{}')
        except ValueError:
            conn.close()
            return
        mine = _hello(self.args)
        rank = hello.get('node_rank')
        reason = None
        if (hello.get('nnodes'), hello.get('tp_size')) != (mine['nnodes'], mine['tp_size']):
            reason = ('node_rank %s has nnodes=%s tp_size=%s, node_rank 0 has nnodes=%d tp_size=%d'
                      % (rank, hello.get('nnodes'), hello.get('tp_size'), mine['nnodes'], mine['tp_size']))
        elif not isinstance(rank, int) or not 0 < rank < mine['nnodes'] or rank in self.joined:
            reason = 'node_rank %s is taken or out of range' % rank
        elif self.complete() or self.lost:
            reason = 'the process group is already initialized; restart every node'
        if reason:
            self.log('refused node %s from %s: %s' % (rank, peer[0], reason))
            conn.sendall((json.dumps({'refused': reason}) + '\n').encode())
            conn.close()
            return
        self.joined[rank] = peer[0]
        self.log('node_rank %d joined from %s (%d of %d)' % (rank, peer[0], len(self.joined) + 1, mine['nnodes']))
        conn.sendall(b'{"ok": true}\n')
        reader.read()   # until the peer goes away
        self.lost = True
        self.state['ready'] = False
        self.log('NCCL error: node_rank %d (%s) went away; the server cannot serve until every node restarts'
                 % (rank, peer[0]))


def join(args, log):
    """A rank > 0: connect to rank 0, or exit 1 with the reason; then exit 1 when rank 0 goes away."""
    host, port = _address(args)
    deadline = time.monotonic() + float(os.environ.get('SGLANG_STANDIN_DIST_TIMEOUT', '120'))
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                sys.stderr.write('torch.distributed.DistNetworkError: failed to connect to %s:%d: %s\n'
                                 % (host, port, exc))
                os._exit(1)  # pylint: disable=protected-access
            time.sleep(0.5)
    conn.settimeout(None)
    conn.sendall((json.dumps(_hello(args)) + '\n').encode())
    reader = conn.makefile('r')
    answer = json.loads(reader.readline() or '{"refused": "rank 0 closed the connection"}')
    if 'refused' in answer:
        sys.stderr.write('RuntimeError: node_rank %d was refused by %s:%d: %s\n'
                         % (args.node_rank, host, port, answer['refused']))
        os._exit(1)  # pylint: disable=protected-access
    log('joined node_rank 0 at %s:%d as node_rank %d of %d' % (host, port, args.node_rank, args.nnodes))

    def watch():
        reader.read()
        sys.stderr.write('RuntimeError: NCCL error: node_rank 0 (%s) went away\n' % host)
        os._exit(1)  # pylint: disable=protected-access
    threading.Thread(target=watch, daemon=True).start()
