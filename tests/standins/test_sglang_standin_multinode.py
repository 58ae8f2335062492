"""The stand-in server's multi-node flags, on this machine: rank 0 is not healthy until the other
rank joined with the same nnodes and tp-size; a rank with other settings is refused and exits 1
with SGLang's kind of error; only rank 0 serves HTTP; a rank that goes away leaves rank 0 at 503."""

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(REPO, 'lab', 'standins', 'sglang_server')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def health(port):
    try:
        return urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            'http://127.0.0.1:%d/health' % port, timeout=2).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def wait_for(predicate, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def launch(tmp_path):
    (tmp_path / 'model').mkdir()
    (tmp_path / 'model' / 'config.json').write_text('{}')
    env = dict(os.environ, PYTHONPATH=STANDIN, SGLANG_STANDIN_MIB='0', SGLANG_STANDIN_LOAD_SECONDS='0.2',
               SGLANG_STANDIN_DIST_TIMEOUT='5')
    env.pop('SGLANG_HS_DUMP_DIR', None)
    started = []

    def start(*flags):
        argv = [sys.executable, '-m', 'sglang_standin.launch_server', '--model-path', str(tmp_path / 'model')]
        # stderr to a file: the forked ranks inherit it and may outlive a launcher killed hard
        err = open(str(tmp_path / ('stderr-%d' % len(started))), 'w+')
        proc = subprocess.Popen(argv + [str(flag) for flag in flags], env=env, stdout=subprocess.DEVNULL,
                                stderr=err, text=True)
        proc.stderr_file = err
        started.append(proc)
        return proc
    yield start
    for proc in started:
        proc.terminate()   # SIGTERM: the launcher kills its ranks
        proc.wait(timeout=15)
        proc.stderr_file.close()


def stderr_of(proc):
    proc.wait(timeout=15)
    proc.stderr_file.seek(0)
    return proc.stderr_file.read()


def test_two_nodes_form_one_server_and_a_wrong_rank_is_refused(launch):
    port, dist = free_port(), free_port()
    common = ['--port', port, '--nnodes', 2, '--dist-init-addr', '127.0.0.1:%d' % dist]
    rank0 = launch('--tp-size', 4, '--node-rank', 0, *common)
    assert wait_for(lambda: health(port) == 503), 'rank 0 does not answer 503 while it waits'
    time.sleep(0.5)
    assert health(port) == 503, 'rank 0 is healthy alone'

    wrong = launch('--tp-size', 2, '--node-rank', 1, *common)
    err = stderr_of(wrong)
    assert wrong.returncode == 1
    assert 'RuntimeError: node_rank 1 was refused' in err and 'nnodes=2 tp_size=2' in err, err
    assert health(port) == 503

    rank1 = launch('--tp-size', 4, '--node-rank', 1, '--host', '0.0.0.0', *common)
    assert wait_for(lambda: health(port) == 200), 'the server is not healthy with both ranks'
    # rank 1 serves no HTTP on its --port (rank 0 has it; rank 1 did not even try)
    assert rank1.poll() is None and rank0.poll() is None

    rank1.terminate()
    rank1.wait(timeout=15)
    assert wait_for(lambda: health(port) == 503), 'rank 0 still healthy without its peer'


@pytest.mark.parametrize('flags,message', [
    (['--nnodes', 2, '--node-rank', 2, '--dist-init-addr', '127.0.0.1:1'], 'node_rank=2 is not in [0, nnodes=2)'),
    (['--nnodes', 2, '--node-rank', 0], '--dist-init-addr is required when nnodes > 1'),
    (['--nnodes', 3, '--tp-size', 4, '--dist-init-addr', '127.0.0.1:1'], 'tp_size=4 must be divisible by nnodes=3'),
])
def test_flags_that_cannot_work_are_refused(launch, flags, message):
    proc = launch('--port', free_port(), *flags)
    err = stderr_of(proc)
    assert proc.returncode == 1 and message in err, err
