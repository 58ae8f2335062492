"""The stand-in server binds as SGLang's uvicorn does: ``::`` is an IPv6-only socket (127.0.0.1 is
refused, [::1] answers), ``0.0.0.0`` is IPv4 only, an IPv6 address is called in brackets."""

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


def health(url):
    """The /health status code, or None when nothing answers."""
    try:
        return urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + '/health', timeout=2).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


@pytest.fixture
def serve(tmp_path):
    (tmp_path / 'config.json').write_text('{}')
    env = dict(os.environ, PYTHONPATH=STANDIN, SGLANG_STANDIN_MIB='0', SGLANG_STANDIN_LOAD_SECONDS='0')
    env.pop('SGLANG_HS_DUMP_DIR', None)
    started = []

    def start(host):
        port = free_port()
        proc = subprocess.Popen([sys.executable, '-m', 'sglang_standin.launch_server', '--model-path', str(tmp_path),
                                 '--host', host, '--port', str(port), '--tp-size', '1'],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(proc)
        return port
    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=15)


def answers(urls, seconds=15):
    """{url: status} once one of them is 200 (or at the deadline)."""
    deadline = time.monotonic() + seconds
    while True:
        found = {url: health(url) for url in urls}
        if 200 in found.values() or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.skipif(not socket.has_ipv6, reason='no IPv6 on this machine')
def test_a_server_on_the_ipv6_wildcard_refuses_ipv4(serve):
    port = serve('::')
    v6, v4 = 'http://[::1]:%d' % port, 'http://127.0.0.1:%d' % port
    assert answers([v6, v4]) == {v6: 200, v4: None}


@pytest.mark.skipif(not socket.has_ipv6, reason='no IPv6 on this machine')
def test_a_server_on_the_ipv4_wildcard_refuses_ipv6(serve):
    port = serve('0.0.0.0')
    v6, v4 = 'http://[::1]:%d' % port, 'http://127.0.0.1:%d' % port
    assert answers([v6, v4]) == {v6: None, v4: 200}


@pytest.mark.skipif(not socket.has_ipv6, reason='no IPv6 on this machine')
def test_a_server_on_ipv6_loopback_answers_in_brackets(serve):
    port = serve('::1')
    assert answers(['http://[::1]:%d' % port]) == {'http://[::1]:%d' % port: 200}
