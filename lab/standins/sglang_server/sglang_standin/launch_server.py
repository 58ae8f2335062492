"""python -m sglang_standin.launch_server: what `python -m sglang.launch_server` looks like
from outside, without a GPU.

It takes SGLang's flags (unknown ones are accepted and ignored), from the command line or,
as SGLang does, from a YAML file given with --config (its keys become --key value before
the other arguments: the command line wins), answers 503 on /health
while "loading" and 200 once ready, logs "The server is fired up and ready to roll!",
and forks one child per tp rank titled sglang::scheduler_TP<n> (plus sglang::detokenizer)
that registers GPU memory with the stand-in nvidia-smi. With --enable-metrics, GET /metrics
serves Prometheus text as SGLang does (metrics.py); without it, 404. Titles are set the way
setproctitle does it: prctl(PR_SET_NAME) and an overwrite of the argv area.

Misbehaviour, from the environment (the unit's Environment= lines):
  SGLANG_STANDIN_LOAD_SECONDS   seconds of 503 before ready (default 2)
  SGLANG_STANDIN_MIB            MiB each rank registers on its GPU (default 1024)
  SGLANG_STANDIN_CRASH          print this line on stderr at start-up and exit 1
  SGLANG_STANDIN_IGNORE_TERM    "1": the ranks ignore SIGTERM and the launcher exits on
                                SIGTERM without killing them (they outlive it)
  SGLANG_STANDIN_NVIDIA_SMI     the control CLI (default nvidia-smi-standin)
"""

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from sglang_standin import generate, metrics, multinode

PR_SET_NAME = 15
READY_LINE = 'The server is fired up and ready to roll!'


def log(msg):
    sys.stdout.write('[%s] %s\n' % (time.strftime('%Y-%m-%d %H:%M:%S'), msg))
    sys.stdout.flush()


def set_title(title):
    """Set comm (15 chars) and rewrite /proc/self/cmdline to title."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, title.encode()[:15], 0, 0, 0)
    with open('/proc/self/stat') as stat:
        fields = stat.read().rsplit(')', 1)[1].split()
    arg_start, arg_end = int(fields[45]), int(fields[46])
    size = arg_end - arg_start
    data = title.encode()[:size - 1]
    with open('/proc/self/mem', 'r+b', buffering=0) as mem:
        mem.seek(arg_start)
        mem.write(data + b'\0' * (size - len(data)))


def config_args(path):
    """The --config file as SGLang's ConfigArgumentMerger turns it into arguments."""
    if not path.endswith(('.yaml', '.yml')):
        raise SystemExit('ValueError: Config file must be YAML format, got: %s' % os.path.splitext(path)[1])
    with open(path) as f:
        text = f.read()
    try:
        import yaml  # pylint: disable=import-outside-toplevel
        config = yaml.safe_load(text)
    except ImportError:  # the role writes JSON, which is YAML too
        config = json.loads(text)
    args = []
    for key, value in (config or {}).items():
        if value is True:
            args.append('--' + key)
        elif value is False:
            continue
        elif isinstance(value, list):
            if value:
                args += ['--' + key] + [str(item) for item in value]
        elif isinstance(value, dict):
            args += ['--' + key, json.dumps(value)]
        else:
            args += ['--' + key, str(value)]
    return args


def merge_config(argv):
    if '--config' not in argv:
        return argv
    at = argv.index('--config')
    return config_args(argv[at + 1]) + argv[:at] + argv[at + 2:]


def parse_args(argv):
    argv = merge_config(list(argv))
    parser = argparse.ArgumentParser(prog='sglang_standin.launch_server')
    parser.add_argument('--model-path', required=True)
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=30000)
    parser.add_argument('--tp-size', '--tp', dest='tp_size', type=int, default=1)
    parser.add_argument('--api-key')
    parser.add_argument('--mem-fraction-static', type=float)
    multinode.add_arguments(parser)  # --nnodes, --node-rank, --dist-init-addr
    args, unknown = parser.parse_known_args(argv)
    return args, unknown


def rank_body(rank, mib, ignore_term, nvidia_smi):
    def body():
        if ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        set_title('sglang::scheduler_TP%d' % rank)
        if mib > 0:
            # the rank's memory counts only while this pid lives (nvidia_smi/README.md)
            subprocess.run([nvidia_smi, 'alloc', '--gpu', str(rank), '--mib', str(mib),
                            '--pid', str(os.getpid())], check=True)
        while True:
            time.sleep(3600)
    return body


def fork(body):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException:  # pylint: disable=broad-except
            code = 1
        finally:
            os._exit(code)  # pylint: disable=protected-access
    return pid


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            path = self.path.split('?', 1)[0]
            if path in ('/health', '/health_generate'):
                # SGLang's api-key middleware lets /health through
                self.answer(200 if state['ready'] else 503, {})
                return
            if path == '/metrics':
                # SGLang's auth middleware lets /metrics through too (Prometheus scrapes it without the key);
                # without --enable-metrics SGLang mounts no such route
                if state.get('metrics') is None:
                    self.answer(404, {'detail': 'Not Found'})
                else:
                    self.send_text(200, state['metrics'].text(), metrics.CONTENT_TYPE)
                return
            key = state['api_key']
            if key and self.headers.get('Authorization') != 'Bearer ' + key:
                self.answer(401, {'error': 'Unauthorized'})
                return
            if path in ('/model_info', '/get_model_info'):
                self.answer(200, {'model_path': state['model_path'], 'is_generation': True})
            elif path in ('/server_info', '/get_server_info'):
                self.answer(200, state['server_info'])
            else:
                self.answer(404, {'detail': 'Not Found'})

        def do_POST(self):  # pylint: disable=invalid-name
            generate.handle_post(self, state)  # /generate, through the real capture (generate.py)

        def answer(self, code, body):
            self.send_text(code, json.dumps(body), 'application/json')

        def send_text(self, code, text, content_type):
            data = text.encode()
            self.send_response(code)
            self.send_header('Content-Type', content_type)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # pylint: disable=arguments-differ
            pass
    return Handler


def main(argv=None):
    args, unknown = parse_args(sys.argv[1:] if argv is None else argv)
    env = os.environ
    crash = env.get('SGLANG_STANDIN_CRASH')
    if crash:
        sys.stderr.write(crash + '\n')
        sys.stderr.flush()
        return 1
    ignore_term = env.get('SGLANG_STANDIN_IGNORE_TERM') == '1'
    mib = int(env.get('SGLANG_STANDIN_MIB', '1024'))
    nvidia_smi = env.get('SGLANG_STANDIN_NVIDIA_SMI', 'nvidia-smi-standin')
    log('server_args: model_path=%s host=%s port=%d tp_size=%d api_key=%s other=%s'
        % (args.model_path, args.host, args.port, args.tp_size,
           'set' if args.api_key else 'unset', ' '.join(unknown)))
    for name in sorted(k for k in env if k.startswith(('SGLANG_', 'SGL_', 'NCCL_', 'GLOO_'))):
        log('env %s=%s' % (name, env[name]))
    if not os.path.isfile(os.path.join(args.model_path, 'config.json')):
        sys.stderr.write('OSError: %s does not appear to have a file named config.json\n'
                         % args.model_path)
        return 1
    refused = multinode.check_args(args)
    if refused:
        sys.stderr.write(refused + '\n')
        return 1
    if args.node_rank > 0:  # only rank 0 serves HTTP: this rank's server is an unreachable loopback one
        multinode.join(args, log)
        args.host, args.port = '127.0.0.1', 0
    try:
        server = generate.Server((args.host, args.port), None)
    except OSError as exc:
        sys.stderr.write('ERROR: [Errno %d] error while attempting to bind on address (%r, %d): '
                         '%s\n' % (exc.errno, args.host, args.port, exc.strerror.lower()))
        return 1
    state = {'ready': False, 'api_key': args.api_key, 'model_path': args.model_path,
             'server_info': {'tp_size': args.tp_size, 'port': args.port, 'host': args.host,
                             'argv': unknown}}
    server.RequestHandlerClass = make_handler(state)
    children = [fork(rank_body(rank, mib, ignore_term, nvidia_smi)) for rank in range(args.tp_size // args.nnodes)]
    children.append(fork(lambda: (set_title('sglang::detokenizer'), time.sleep(1e9))))

    def on_term(signum, frame):  # pylint: disable=unused-argument
        log('Received sigterm, shutting down')
        if not ignore_term:
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os._exit(0)  # pylint: disable=protected-access
    signal.signal(signal.SIGTERM, on_term)
    generate.setup(state, args.model_path, log)  # after on_term: the capture's handler chains to it
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log('Load weight begin. avail mem=%d MiB' % (143771 - 615))
    time.sleep(float(env.get('SGLANG_STANDIN_LOAD_SECONDS', '2')))
    for pid in children:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            sys.stderr.write('RuntimeError: rank process %d exited with status %d\n' % (pid, status))
            on_term(signal.SIGTERM, None)
    rendezvous = multinode.Rendezvous(args, state, log) if args.nnodes > 1 and args.node_rank == 0 else None
    while rendezvous and not rendezvous.complete():  # not healthy until every other rank joined
        time.sleep(0.2)
    state['ready'] = True
    log(READY_LINE)
    while True:
        time.sleep(3600)


if __name__ == '__main__':
    sys.exit(main())
