"""The server's config file, Environment= and ExecStart= values: what SGLang and systemd
get, and the refusal, naming the variable, of every value that could break a line."""

import json

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.eagle3.extraction.plugins.filter.sglang_server_unit import (
    FilterModule, sglang_server_config, systemd_command, systemd_environment)

KEY = 'sk-test-0123456789abcdef'
BASE = {'model-path': '/srv/models/kimi', 'host': '127.0.0.1', 'port': 8000, 'tp-size': 8}


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'sglang_server_config', 'systemd_environment', 'systemd_command'}


def test_flags_become_the_config_that_yaml_and_json_read_alike():
    flags = dict(BASE, **{'mem-fraction-static': 0.88, 'disable-radix-cache': True, 'skip-server-warmup': False,
                          'served-model-name': None, 'cuda-graph-bs': [1, 2, 4], 'json-model-override-args':
                          {'rope_scaling': {'factor': 2}}, 'chat-template': 'a b "c" \\ %s $HOME ünï'})
    text = sglang_server_config(flags, KEY)
    expected = {'model-path': '/srv/models/kimi', 'host': '127.0.0.1', 'port': 8000, 'tp-size': 8,
                'mem-fraction-static': 0.88, 'disable-radix-cache': True, 'cuda-graph-bs': [1, 2, 4],
                'json-model-override-args': {'rope_scaling': {'factor': 2}},
                'chat-template': 'a b "c" \\ %s $HOME ünï', 'api-key': KEY}
    assert yaml.safe_load(text) == expected     # what SGLang's --config reads
    assert json.loads(text) == expected         # what the stand-in reads
    assert text.endswith('\n')


def test_no_key_means_no_api_key_entry():
    assert 'api-key' not in json.loads(sglang_server_config(BASE, ''))
    assert 'api-key' not in json.loads(sglang_server_config(BASE, None))


def test_extra_args_are_parsed_as_typed_and_win():
    text = sglang_server_config(dict(BASE, **{'log-level': 'info'}), '', [
        '--enable-metrics', '--log-level', 'debug', '--served-model-name=demo', '--cuda-graph-bs', '1', '2'])
    config = json.loads(text)
    assert config['enable-metrics'] is True and config['log-level'] == 'debug' and config['port'] == 8000
    assert config['served-model-name'] == 'demo' and config['cuda-graph-bs'] == ['1', '2']


@pytest.mark.parametrize('extra_args, message', [
    # the address read 9001 and the config file ["9001", "9002"]: refused at --port, before either
    (['--port', '9001', '9002'],
     "sglang_server_extra_args[0]='--port' sets --port; --port is sglang_server_port's: set that instead"),
    (['--enable-metrics', '--host=::'],
     "sglang_server_extra_args[1]='--host=::' sets --host; --host is sglang_server_host's: set that instead"),
    (['--tp-size', '8'],
     "sglang_server_extra_args[0]='--tp-size' sets --tp-size; --tp-size is sglang_server_tp_size's: set that instead"),
    (['--model-path=/m'], "sglang_server_extra_args[0]='--model-path=/m' sets --model-path; --model-path is "
                          "sglang_server_model_path's: set that instead"),
])
def test_a_core_flag_in_the_extra_args_is_refused_naming_its_variable(extra_args, message):
    with pytest.raises(AnsibleFilterError) as err:
        sglang_server_config(BASE, '', extra_args)
    assert str(err.value) == message


BAD_FLAG_VALUES = [
    ('model-path', '/srv/models\n--api-key x', 'sglang_server_model_path'),
    ('host', '127.0.0.1\r', 'sglang_server_host'),
    ('port', '8000\x00', 'sglang_server_port'),
    ('tp-size', '8\t', 'sglang_server_tp_size'),
    ('chat-template', 'a\x1bb', "sglang_server_flags['chat-template']"),
    ('chat-template', 'a\x85b', "sglang_server_flags['chat-template']"),
    ('chat-template', 'a\u2028b', "sglang_server_flags['chat-template']"),
    ('chat-template', 'a\u200bb', "sglang_server_flags['chat-template']"),
    ('mem-fraction-static', float('nan'), "sglang_server_flags['mem-fraction-static']"),
    ('mem-fraction-static', float('inf'), "sglang_server_flags['mem-fraction-static']"),
    ('cuda-graph-bs', [1, '2\n'], "sglang_server_flags['cuda-graph-bs'][1]"),
    ('cuda-graph-bs', [[1]], "sglang_server_flags['cuda-graph-bs'][0]"),
    ('json-model-override-args', {'a': 'b\nc'}, "sglang_server_flags['json-model-override-args']['a']"),
    ('json-model-override-args', {'a\n': 1}, "sglang_server_flags['json-model-override-args'] key"),
    ('weird', object(), "sglang_server_flags['weird']"),
]


@pytest.mark.parametrize('key,value,variable', BAD_FLAG_VALUES)
def test_a_bad_flag_value_is_refused_naming_the_variable(key, value, variable):
    with pytest.raises(AnsibleFilterError) as err:
        sglang_server_config(dict(BASE, **{key: value}), KEY)
    assert variable in str(err.value)
    assert KEY not in str(err.value)


@pytest.mark.parametrize('key', ['--port', 'Port', 'mem fraction', 'a\nb', '', '-x', 'a=b', 'api-key',
                                 'disable-cuda-graph', 'admin-api-key', 'config', 7])
def test_a_bad_flag_name_is_refused(key):
    with pytest.raises(AnsibleFilterError) as err:
        sglang_server_config({**BASE, key: 'x'}, '')
    assert 'sglang_server_flags' in str(err.value)


@pytest.mark.parametrize('api_key', ['sk\n--port 1', 'sk\r', 'sk\x00', '\tsk', ' sk', 'sk ', 'sk\u2029'])
def test_a_bad_api_key_is_refused_without_showing_it(api_key):
    with pytest.raises(AnsibleFilterError) as err:
        sglang_server_config(BASE, api_key)
    assert 'sglang_server_api_key' in str(err.value)
    assert api_key.strip() not in str(err.value)


@pytest.mark.parametrize('api_key', [12345, ['sk'], {'k': 'v'}, True])
def test_an_api_key_that_is_not_a_string_is_refused(api_key):
    with pytest.raises(AnsibleFilterError, match='sglang_server_api_key'):
        sglang_server_config(BASE, api_key)


@pytest.mark.parametrize('extra_args', ['--enable-metrics', ['value-first'], ['--ok', 'a\nb'], ['--api-key', 'x'],
                                        ['--config', '/etc/x.yaml'], [3]])
def test_bad_extra_args_are_refused(extra_args):
    with pytest.raises(AnsibleFilterError, match='sglang_server_extra_args'):
        sglang_server_config(BASE, '', extra_args)


def test_environment_is_sorted_quoted_and_specifiers_escaped():
    env = {'NCCL_PROTO': 'LL', 'B': 'two words', 'A': 'x"y\\z', 'P': '50%', 'D': '$HOME', 'N': 16, 'T': True}
    assert systemd_environment(env) == ['"A=x\\"y\\\\z"', '"B=two words"', '"D=$HOME"', 'N=16', 'NCCL_PROTO=LL',
                                        '"P=50%%"', 'T=true']


@pytest.mark.parametrize('env,shown', [
    ({'A': 'x\ny'}, "sglang_server_env['A']"),
    ({'A': 'x\ry'}, "sglang_server_env['A']"),
    ({'A': '\x07'}, "sglang_server_env['A']"),
    ({'A': None}, "sglang_server_env['A']"),
    ({'A': ['x']}, "sglang_server_env['A']"),
    ({'A': float('nan')}, "sglang_server_env['A']"),
    ({'1A': 'x'}, 'sglang_server_env'),
    ({'A B': 'x'}, 'sglang_server_env'),
    ({'A\n': 'x'}, 'sglang_server_env'),
    ({'A=B': 'x'}, 'sglang_server_env'),
])
def test_a_bad_environment_entry_is_refused_naming_it(env, shown):
    with pytest.raises(AnsibleFilterError) as err:
        systemd_environment(env)
    assert shown in str(err.value)


def test_exec_start_holds_only_the_config_file():
    line = systemd_command(['/root/ml-env/bin/python', '-m', 'sglang.launch_server', '--config',
                            '/etc/sglang/sglang-extraction.yaml'])
    assert line == '/root/ml-env/bin/python -m sglang.launch_server --config /etc/sglang/sglang-extraction.yaml'
    assert systemd_command(['/opt/my env/python', '50%', '$X']) == '"/opt/my env/python" "50%%" "$$X"'


@pytest.mark.parametrize('argv,shown', [
    (['/usr/bin/python', '-m', 'sglang\n.launch_server'], 'sglang_server_module'),
    (['python', '-m', 'x'], 'sglang_server_python'),
    (['/usr/bin/python', '', 'x'], 'ExecStart word 1'),
    (['/usr/bin/python\t'], 'sglang_server_python'),
    ([], 'ExecStart'),
])
def test_a_bad_exec_start_word_is_refused_naming_it(argv, shown):
    with pytest.raises(AnsibleFilterError) as err:
        systemd_command(argv, ['sglang_server_python', 'ExecStart word 1', 'sglang_server_module'])
    assert shown in str(err.value)
