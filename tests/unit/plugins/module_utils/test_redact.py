"""Secrets never leave a module in a command line, a log line or a message (plugins/module_utils/redact.py)."""

from __future__ import annotations

import pytest

from ansible_collections.eagle3.extraction.plugins.module_utils.redact import (
    REDACTED, is_secret_name, redact_argv, redact_text, redact_value)

SECRET = 'sk-Zq9!x/y+z=='


@pytest.mark.parametrize('argv, expected', [
    (['sglang', '--api-key', SECRET, '--port', '30000'], ['sglang', '--api-key', REDACTED, '--port', '30000']),
    (['sglang', '--api-key=' + SECRET], ['sglang', '--api-key=' + REDACTED]),
    (['sglang', '--admin-api-key', SECRET], ['sglang', '--admin-api-key', REDACTED]),
    (['sglang', '--admin-api-key=' + SECRET], ['sglang', '--admin-api-key=' + REDACTED]),
    (['env', 'SGLANG_API_KEY=' + SECRET, 'python3'], ['env', 'SGLANG_API_KEY=' + REDACTED, 'python3']),
    (['env', 'HF_TOKEN=' + SECRET], ['env', 'HF_TOKEN=' + REDACTED]),
    (['tool', '--password', SECRET], ['tool', '--password', REDACTED]),
    (['tool', '--password=' + SECRET], ['tool', '--password=' + REDACTED]),
    (['tool', '--db-passwd', SECRET], ['tool', '--db-passwd', REDACTED]),
    (['tool', '--client-secret', SECRET], ['tool', '--client-secret', REDACTED]),
    (['tool', '--hf-token', SECRET], ['tool', '--hf-token', REDACTED]),
    (['tool', '-token', SECRET], ['tool', '-token', REDACTED]),
    (['tool', '--apiKey', SECRET], ['tool', '--apiKey', REDACTED]),
    (['tool', 'AWS_SECRET_ACCESS_KEY=' + SECRET], ['tool', 'AWS_SECRET_ACCESS_KEY=' + REDACTED]),
    # a value with '=' in it is hidden whole
    (['tool', '--api-key=a=b=c'], ['tool', '--api-key=' + REDACTED]),
    # a flag given without its value: the next flag stays
    (['sglang', '--api-key', '--port', '1'], ['sglang', '--api-key', '--port', '1']),
    # the last element being the flag
    (['sglang', '--api-key'], ['sglang', '--api-key']),
    # a whole shell command as one element
    (['sh', '-c', 'exec sglang --api-key ' + SECRET + ' --port 1'],
     ['sh', '-c', 'exec sglang --api-key ' + REDACTED + ' --port 1']),
    (['sh', '-c', '"sglang --api-key %s"' % SECRET], ['sh', '-c', '"sglang --api-key %s"' % REDACTED]),
    # two secrets in one argv
    (['a', '--api-key', 'k1', '--admin-api-key', 'k2'], ['a', '--api-key', REDACTED, '--admin-api-key', REDACTED]),
])
def test_redact_argv_hides_secret_values(argv, expected):
    assert redact_argv(argv) == expected
    assert SECRET not in ' '.join(redact_argv(argv))


@pytest.mark.parametrize('argv', [
    ['python3', '-m', 'sglang.launch_server', '--model-path', '/models/kimi', '--port', '30000'],
    ['sglang', '--tokenizer-path', '/models/tok', '--ssl-keyfile', '/etc/k.pem'],
    ['sglang', '--kv-cache-dtype', 'fp8_e5m2', '--max-tokens', '4096'],
    ['sleep', '600'],
    ['env', 'PATH=/usr/bin', 'CUDA_VISIBLE_DEVICES=0,1'],
    ['sglang', '--monkey', 'x', '--donkey=y', '--keystone', 'z'],
    [],
])
def test_redact_argv_keeps_what_is_not_secret(argv):
    assert redact_argv(argv) == argv


def test_redact_argv_returns_a_copy():
    argv = ['x', '--api-key', SECRET]
    redact_argv(argv)
    assert argv == ['x', '--api-key', SECRET]


@pytest.mark.parametrize('text, expected', [
    ('python3 -m sglang.launch_server --api-key %s --port 30000' % SECRET,
     'python3 -m sglang.launch_server --api-key <redacted> --port 30000'),
    ('sglang --api-key=%s --port 30000' % SECRET, 'sglang --api-key=<redacted> --port 30000'),
    ('sglang --admin-api-key %s' % SECRET, 'sglang --admin-api-key <redacted>'),
    ('SGLANG_API_KEY=%s HF_TOKEN=hf_abc sglang' % SECRET, 'SGLANG_API_KEY=<redacted> HF_TOKEN=<redacted> sglang'),
    ("server_args=ServerArgs(model_path='/m', api_key='%s', port=30000)" % SECRET,
     "server_args=ServerArgs(model_path='/m', api_key=<redacted>, port=30000)"),
    # the first keyword right after the opening parenthesis
    ("server_args=ServerArgs(api_key='%s', port=1)" % SECRET, "server_args=ServerArgs(api_key=<redacted>, port=1)"),
    ("ServerArgs(admin_api_key=\"%s\")" % SECRET, "ServerArgs(admin_api_key=<redacted>)"),
    # no key set: kept, so the log still says so
    ("ServerArgs(api_key=None, admin_api_key=None)", "ServerArgs(api_key=None, admin_api_key=None)"),
    ('{"api_key": "%s", "port": 30000}' % SECRET, '{"api_key": <redacted>, "port": 30000}'),
    ("{'hf_token': '%s'}" % SECRET, "{'hf_token': <redacted>}"),
    ('api-key: %s\nport: 30000' % SECRET, 'api-key: <redacted>\nport: 30000'),
    ('  api_key:   %s  ' % SECRET, '  api_key:   <redacted>  '),
    ('curl -H "Authorization: Bearer %s" http://x' % SECRET, 'curl -H "Authorization: Bearer <redacted>" http://x'),
    ('tool --password %s' % SECRET, 'tool --password <redacted>'),
    ("tool --password '%s with blanks'" % SECRET, 'tool --password <redacted>'),
    ('sh -c "sglang --api-key %s"' % SECRET, 'sh -c "sglang --api-key <redacted>"'),
    # an unterminated quote hides to the end of the line
    ("api_key='%s and more" % SECRET, 'api_key=<redacted>'),
    ('line one\nserver --api-key %s\nline three' % SECRET, 'line one\nserver --api-key <redacted>\nline three'),
])
def test_redact_text_hides_secret_values(text, expected):
    assert redact_text(text) == expected
    assert SECRET not in redact_text(text)


@pytest.mark.parametrize('text', [
    '',
    'nothing to hide here',
    'sglang --tokenizer-path /m/tok --port 30000',
    'INFO: Uvicorn running on http://127.0.0.1:30000',
    'port 30000 is held by pid 42 (python3)',
    'max_tokens=4096 monkey=1',
    "ServerArgs(model_path='/models/kimi', tp_size=8)",
])
def test_redact_text_keeps_what_is_not_secret(text):
    assert redact_text(text) == text


@pytest.mark.parametrize('name', [
    '--api-key', '--admin-api-key', 'api_key', 'SGLANG_API_KEY', 'HF_TOKEN', '--password', 'db_passwd',
    'CLIENT_SECRET', 'apiKey', '"api_key"', 'credentials', '--ssh-passphrase',
])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize('name', [
    '--tokenizer-path', '--ssl-keyfile', 'monkey', 'keystone', 'PATH', '--port', 'server_args', 'tokenizer',
])
def test_names_that_are_not_secret(name):
    assert not is_secret_name(name)


def test_redact_value_walks_results():
    result = {
        'holders': [{'pid': 7, 'cmdline': 'sglang --api-key %s' % SECRET, 'argv': ['sglang', '--api-key=%s' % SECRET]}],
        'api_key': SECRET,
        'port': 30000,
        'msg': 'failed: HF_TOKEN=%s' % SECRET,
    }
    out = redact_value(result)
    assert SECRET not in repr(out)
    assert out['port'] == 30000
    assert out['api_key'] == REDACTED
    assert out['holders'][0]['pid'] == 7
    assert out['holders'][0]['cmdline'] == 'sglang --api-key <redacted>'
