"""SGLang reads the role's config file as it would read the same flags on its command line.

The unit runs `python -m sglang.launch_server --config <file>` and nothing else, so that `ps`
shows no flag value and no API key. This proves, with each supported sglang's own
prepare_server_args (its ConfigArgumentMerger and its full parser, tests/patch/sglang_argparse.py),
that the file the role writes (the sglang_server_config filter) gives the very settings the
equivalent command line gives, the key included. The stand-in server must read it alike.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import zipfile

import pytest

import sglang_source
from ansible_collections.eagle3.extraction.plugins.filter.sglang_server_unit import sglang_server_config

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(sglang_source.REPO, 'lab', 'standins', 'sglang_server')
# sglang 0.5.23 keeps its settings in msgspec records: the parser needs the real package
MSGSPEC = 'msgspec==0.23.0'
VERSIONS = ['0.5.14', '0.5.23']
KEY = 'sk-test-Zq8 key with spaces, quotes " and $HOME'

# What inventory/example and the role's defaults give, plus one flag of each kind.
FLAGS = {
    'model-path': '/srv/models/Kimi K2',
    'host': '0.0.0.0',
    'port': 30000,
    'tp-size': 8,
    'mem-fraction-static': 0.88,
    'disable-prefill-cuda-graph': True,    # the two stand for --disable-cuda-graph, which --config refuses
    'disable-decode-cuda-graph': True,
    'disable-radix-cache': True,
    'disable-custom-all-reduce': True,
    'skip-server-warmup': False,          # false: not passed
    'served-model-name': 'kimi-k2',
    'gc-threshold': [700, 10, 10],         # a multi-value flag
    'json-model-override-args': {'rope_scaling': {'factor': 2.0}},
}
EXTRA_ARGS = ['--enable-metrics', '--log-level', 'warning']
# the same settings typed on a command line
ARGV = ['--model-path', '/srv/models/Kimi K2', '--host', '0.0.0.0', '--port', '30000', '--tp-size', '8',
        '--mem-fraction-static', '0.88', '--disable-prefill-cuda-graph',
        '--disable-decode-cuda-graph', '--disable-radix-cache',
        '--disable-custom-all-reduce', '--served-model-name', 'kimi-k2', '--gc-threshold', '700', '10', '10',
        '--json-model-override-args', '{"rope_scaling": {"factor": 2.0}}', '--enable-metrics',
        '--log-level', 'warning', '--api-key', KEY]


def tree(version):
    """The sglang package of the version's wheel, unpacked whole (cached)."""
    dest = os.path.join(sglang_source.CACHE, version + '-tree')
    if not os.path.isfile(os.path.join(dest, 'sglang', 'srt', 'server_args.py')):
        with zipfile.ZipFile(sglang_source.wheel(version)) as wheel:
            wheel.extractall(dest, [m for m in wheel.namelist() if m.startswith('sglang/')])
    return dest


def msgspec_dir():
    dest = os.path.join(sglang_source.CACHE, 'site-' + MSGSPEC.replace('==', '-'))
    if not glob.glob(os.path.join(dest, 'msgspec', '__init__.py')):
        subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--only-binary=:all:',
                        '--target', dest, MSGSPEC], check=True)
    return dest


def run_sglang_parser(version, argv):
    return subprocess.run([sys.executable, os.path.join(HERE, 'sglang_argparse.py'), tree(version),
                          json.dumps(argv), msgspec_dir()],
                          capture_output=True, text=True, timeout=300, check=False)


def sglang_settings(version, argv):
    out = run_sglang_parser(version, argv)
    lines = [line for line in out.stdout.splitlines() if line.startswith('SETTINGS ')]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(lines[-1][len('SETTINGS '):])


@pytest.fixture(scope='module')
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('etc') / 'sglang-extraction.yaml'
    path.write_text(sglang_server_config(FLAGS, KEY, EXTRA_ARGS))
    return str(path)


@pytest.mark.parametrize('version', VERSIONS)
def test_sglang_reads_the_config_file_as_the_command_line(version, config_file):
    from_file = sglang_settings(version, ['--config', config_file])
    from_argv = sglang_settings(version, ARGV)
    assert from_file == from_argv
    # and those are the settings meant, not the defaults
    assert from_file['api_key'] == KEY
    assert from_file['model_path'] == '/srv/models/Kimi K2'
    assert (from_file['port'], from_file['tp_size'], from_file['mem_fraction_static']) == (30000, 8, 0.88)
    assert from_file['disable_radix_cache'] is True and from_file['skip_server_warmup'] is False
    assert from_file['disable_prefill_cuda_graph'] is True and from_file['disable_decode_cuda_graph'] is True
    assert from_file['gc_threshold'] == [700, 10, 10]
    assert json.loads(from_file['json_model_override_args']) == {'rope_scaling': {'factor': 2.0}}
    assert from_file['enable_metrics'] is True and from_file['log_level'] == 'warning'


@pytest.mark.parametrize('version', VERSIONS)
def test_sglang_refuses_the_deprecated_disable_cuda_graph_in_a_config_file(version, tmp_path):
    """Why the filter refuses it and the defaults use the two per-phase flags instead."""
    path = tmp_path / 'old.yaml'
    path.write_text('{"model-path": "/m", "disable-cuda-graph": true}\n')
    out = run_sglang_parser(version, ['--config', str(path)])
    assert out.returncode != 0
    assert "Unsupported config option 'disable_cuda_graph'" in out.stderr


def test_the_command_line_wins_over_the_config_file(config_file):
    assert sglang_settings('0.5.23', ['--config', config_file, '--port', '31000'])['port'] == 31000


def test_the_standin_reads_the_config_file_as_sglang_does(config_file):
    sys.path.insert(0, STANDIN)
    try:
        from sglang_standin.launch_server import parse_args  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(STANDIN)
    args, unknown = parse_args(['--config', config_file])
    assert (args.model_path, args.host, args.port, args.tp_size, args.api_key, args.mem_fraction_static) == \
        ('/srv/models/Kimi K2', '0.0.0.0', 30000, 8, KEY, 0.88)
    assert '--disable-radix-cache' in unknown and '--skip-server-warmup' not in unknown
    assert parse_args(['--config', config_file, '--port', '31000'])[0].port == 31000
