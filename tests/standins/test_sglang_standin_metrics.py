"""The stand-in server's GET /metrics, as SGLang serves it: Prometheus text with SGLang's own series names and
model_name label when started with --enable-metrics (from the command line or the role's --config file), counting
the requests it answered; no key wanted; 404 without the flag."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(REPO, 'lab', 'standins', 'sglang_server')
KEY = 'standin-metrics-key'
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def call(url, body=None, key=None):
    """(status, content type, text)."""
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers=dict({'Authorization': 'Bearer ' + key} if key else {},
                                                  **({'Content-Type': 'application/json'} if body else {})))
    try:
        with OPENER.open(request, timeout=10) as answer:
            return answer.status, answer.headers.get('Content-Type'), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get('Content-Type'), exc.read().decode()


@pytest.fixture
def serve(tmp_path):
    (tmp_path / 'model').mkdir()
    (tmp_path / 'model' / 'config.json').write_text('{"hidden_size": 8}')
    env = dict(os.environ, PYTHONPATH=STANDIN, SGLANG_STANDIN_MIB='0', SGLANG_STANDIN_LOAD_SECONDS='0')
    env.pop('SGLANG_HS_DUMP_DIR', None)
    started = []

    def start(*args):
        port = free_port()
        proc = subprocess.Popen([sys.executable, '-m', 'sglang_standin.launch_server', '--model-path',
                                 str(tmp_path / 'model'), '--port', str(port), '--api-key', KEY, *args],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(proc)
        url = 'http://127.0.0.1:%d' % port
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if call(url + '/health')[0] == 200:
                    return url
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError('the stand-in did not become healthy')
    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=15)


def samples(text):
    """{series with its labels: value} of Prometheus text."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            name, value = line.rsplit(' ', 1)
            found[name] = float(value)
    return found


def test_with_enable_metrics_it_serves_sglangs_series_without_the_key_and_counts_what_it_answered(serve):
    url = serve('--enable-metrics', '--served-model-name', 'demo/model')
    for ids in ([1, 2, 3], [4, 5]):
        status, _type, _text = call(url + '/generate', {'input_ids': ids, 'sampling_params': {'max_new_tokens': 1}},
                                    key=KEY)
        assert status == 200
    # Prometheus scrapes without the key, as SGLang lets it
    status, content_type, text = call(url + '/metrics')
    assert status == 200 and content_type.startswith('text/plain; version=0.0.4')
    found = samples(text)
    label = '{model_name="demo/model"}'
    assert found['sglang:prompt_tokens_total' + label] == 5
    assert found['sglang:generation_tokens_total' + label] == 2
    assert found['sglang:num_requests_total' + label] == 2
    assert found['sglang:num_running_reqs' + label] == 0 and found['sglang:num_queue_reqs' + label] == 0
    assert re.search(r'^# TYPE sglang:num_running_reqs gauge$', text, re.M)
    assert re.search(r'^# TYPE sglang:prompt_tokens_total counter$', text, re.M)


def test_the_flag_from_the_roles_config_file_turns_it_on_and_the_model_path_is_the_label(serve, tmp_path):
    config = tmp_path / 'server.yaml'
    config.write_text(json.dumps({'enable-metrics': True}))
    url = serve('--config', str(config))
    status, _type, text = call(url + '/metrics')
    assert status == 200
    assert 'sglang:num_requests_total{model_name="%s"} 0.0' % (tmp_path / 'model') in text


def test_without_the_flag_there_is_no_metrics_route(serve, tmp_path):
    config = tmp_path / 'server.yaml'
    config.write_text(json.dumps({'enable-metrics': False}))
    url = serve('--config', str(config))
    assert call(url + '/metrics')[0] == 404
    assert call(url + '/metrics', key=KEY)[0] == 404
