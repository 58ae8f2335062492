"""Bad values for every option of the five modules: each is refused cleanly, naming the
option, before anything is read or changed.

Each case runs the module's main() in-process (the run_module fixture) with one bad
value beside otherwise good options, and checks that:

- the module fails (no traceback: an exception would escape main() and fail the test);
- the message names the option;
- nothing was done: no process was listed or signalled (/proc scanning and signalling are
  replaced by tripwires), no external command ran (pct, nvidia-smi and lxc-info on PATH are
  recorders that log every call), no shared-memory segment was removed, no container config
  file changed.

The kinds of bad value are those of the module rules: a newline or other control character
anywhere in a value, numbers that are not finite, out of range or booleans, selections that
could select everything, and values not in the format the option names.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import pytest
from ansible_collections.eagle3.extraction.plugins.module_utils import procfs, reclaim
from ansible_collections.eagle3.extraction.plugins.modules import (
    gpu_facts, pct_container, port_reclaim, process_reclaim, shm_reclaim)

NUMBERS_NOT_FINITE = ['nan', 'inf', '-inf', 'NaN']
BOOLEANS = [True, False]
CONTROL = ['\n', '\r', '\t', '\x00', '\x1b', '\x7f']


def with_control(value):
    """value with each control character at its end, its start or in its middle."""
    cases = []
    for index, char in enumerate(CONTROL):
        where = index % 3
        cases.append(value + char if where == 0 else char + value if where == 1 else value[:1] + char + value[1:])
    return cases


# ------------------------------------------------------------------ tripwires and recorders

RECORDER = '#!/bin/sh\necho "$0 $*" >> "%s"\nexit 0\n'


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    """Recording pct, nvidia-smi and lxc-info; a tmpfs directory with segments; a container config."""
    root = tmp_path_factory.mktemp('bad-values')
    bin_dir = root / 'bin'
    bin_dir.mkdir()
    log = root / 'commands.log'
    log.write_text('')
    for name in ('pct', 'nvidia-smi', 'lxc-info', 'fuser', 'ss', 'systemctl'):
        path = bin_dir / name
        path.write_text(RECORDER % log)
        path.chmod(0o755)
    conf_dir = root / 'lxc'
    conf_dir.mkdir()
    (conf_dir / '101.conf').write_text('arch: amd64\ncores: 2\nhostname: ct101\nmemory: 2048\n')
    shm = tempfile.mkdtemp(prefix='bad-values.', dir='/dev/shm')
    segments = {}
    for name in ('nccl-stale', 'psm_stale', 'other.bin', 'sem.x'):
        path = os.path.join(shm, name)
        with open(path, 'wb') as handle:
            handle.write(name.encode())
        hour_ago = time.time() - 3600
        os.utime(path, (hour_ago, hour_ago))
        segments[path] = name.encode()
    plain_file = root / 'plain'
    plain_file.write_text('x')
    not_executable = root / 'not-executable'
    not_executable.write_text('#!/bin/sh\n')
    yield {'root': root, 'bin': bin_dir, 'log': log, 'conf_dir': conf_dir, 'shm': shm, 'segments': segments,
           'plain': plain_file, 'not_executable': not_executable}
    for path in segments:
        if os.path.exists(path):
            os.unlink(path)
    os.rmdir(shm)


@pytest.fixture
def tripwires(lab, monkeypatch):
    """Nothing may list /proc or send a signal; the recorders come first on PATH."""
    def tripped(*_args, **_kwargs):
        raise AssertionError('the module read /proc or signalled before refusing a bad value')
    monkeypatch.setattr(procfs, 'list_pids', tripped)
    monkeypatch.setattr(procfs, 'snapshot', tripped)
    monkeypatch.setattr(procfs, 'find_listeners', tripped)
    monkeypatch.setattr(reclaim, 'terminate', tripped)
    monkeypatch.setattr(reclaim.os, 'kill', tripped)
    monkeypatch.setattr(process_reclaim.os, 'kill', tripped)
    monkeypatch.setattr(shm_reclaim, 'remove', tripped)
    monkeypatch.setenv('PATH', '%s:%s' % (lab['bin'], os.environ.get('PATH', '/usr/bin:/bin')))
    lab['log'].write_text('')
    conf = lab['conf_dir'] / '101.conf'
    before = conf.read_text()
    yield
    assert lab['log'].read_text() == '', 'an external command ran: %s' % lab['log'].read_text()
    assert conf.read_text() == before, 'the container config changed'
    for path, content in lab['segments'].items():
        with open(path, 'rb') as handle:
            assert handle.read() == content, '%s changed or went' % path


def refused(run_module, module, args, option):
    """Run module with args; assert a clean failure naming option; return the result."""
    result = run_module(module, args)
    assert result.get('failed') is True, result
    if '\\u0000' in json.dumps(args[option]):
        # ansible-core refuses a NUL byte itself, before the module's checks, when it logs the invocation
        assert option in result['msg'] or 'embedded null character' in result['msg'], result['msg']
    else:
        assert option in result['msg'], result['msg']
    assert 'Traceback' not in result['msg'] and 'exception' not in result
    assert not result.get('killed') and not result.get('removed') and result.get('changed') in (None, False)
    return result


def cases(option, values):
    return [pytest.param(option, value, id='%s=%r' % (option, value)) for value in values]


# ------------------------------------------------------------------ the shared reclaim options

TIMEOUT_BAD = NUMBERS_NOT_FINITE + [-1, -0.001, 3601, 1e300, '1e300', True, 'ten', '10\n', '']
COMMAND_TIMEOUT_BAD = NUMBERS_NOT_FINITE + [0, 0.5, -5, 601, 1e300, True, 'x']
VMID_BAD = [0, 1, 99, -101, 1000000000, 10 ** 12, True, False, 'abc', '101\n', 101.5, 'nan']

COMMON_CASES = (cases('signal_timeout', TIMEOUT_BAD) + cases('kill_timeout', TIMEOUT_BAD)
                + cases('command_timeout', COMMAND_TIMEOUT_BAD) + cases('vmid', VMID_BAD))


# ------------------------------------------------------------------ port_reclaim

PORT_CASES = (
    cases('port', [0, -1, 65536, 10 ** 9, True, False, 'abc', '80\n', 1.5, 'nan', 'inf', ''])
    + cases('address', ['localhost', '', '999.1.1.1', '::g', '1.2.3.4/24', '1.2.3.4 ', ' 1.2.3.4', 'x' * 300,
                        '0x7f000001'] + with_control('127.0.0.1'))
    + COMMON_CASES
)


@pytest.mark.parametrize('option, value', PORT_CASES)
def test_port_reclaim_refuses(option, value, tripwires, run_module):
    args = {'port': 8000}
    args[option] = value
    refused(run_module, port_reclaim, args, option)


# ------------------------------------------------------------------ process_reclaim

MATCH_EVERYTHING = ['', '.*', 'a*', '^', '$', '(?:)', 'x?', r'\s*', '(a|)', '.', r'\w', r'\S', 's', 'd',
                    'sbin', '[a-z]', '.+', '(?s).*x?']
PROCESS_CASES = (
    cases('match', [[pattern] for pattern in MATCH_EVERYTHING])
    + cases('match', [['^sglang::', ''], ['sglang::('], ['*'], ['[('], ['^sglang::\n'], ['^sglang::\x00']])
    + cases('match', [[]])  # selects nothing by name while gpu_holders is false
    + cases('exclude', [[0], [-1], [True], [4194305], [10 ** 12], ['abc'], [1.5], ['12\n']])
    + cases('gpu_memory_max_mib', [-1, True, 10 ** 12, 16777217, 'nan', 'abc', 1.5])
    + cases('gpu_wait_timeout', NUMBERS_NOT_FINITE + [-1, 1e300, 3601, True])
    + cases('nvidia_smi_path', ['/nonexistent/nvidia-smi', 'relative/nvidia-smi', '/', 'NOT_EXECUTABLE',
                                '/usr/bin/nvidia-smi\n'])
    + cases('gpu_holders', ['maybe', 2])
    + cases('zombies', ['perhaps'])
    + COMMON_CASES
)


@pytest.mark.parametrize('option, value', PROCESS_CASES)
def test_process_reclaim_refuses(option, value, lab, tripwires, run_module):
    if value == 'NOT_EXECUTABLE':
        value = str(lab['not_executable'])
    refused(run_module, process_reclaim, {option: value}, option)


# ------------------------------------------------------------------ shm_reclaim

SHM_CASES = (
    cases('path', ['relative/shm', '', '/dev/shm\n', '\n/dev/shm', '/dev/shm\x00x', '/', '/etc', '/usr',
                   '/dev/shm/../../etc', 'PLAIN_FILE', 'EXT4_DIR'])
    + cases('patterns', [['*'], ['?'], ['[a-z]*'], ['*.bin'], ['a*'], ['ab*'], ['nc?l-*'], ['nccl/x*'],
                         ['../nccl-*'], ['nccl-*\n'], [''], ['\\*'], ['nccl-*', '*'], ['*nccl'], ['[n]ccl-*']])
    + cases('min_age', NUMBERS_NOT_FINITE + [-1, 1e300, 2592001, True, 'abc'])
)


@pytest.mark.parametrize('option, value', SHM_CASES)
def test_shm_reclaim_refuses(option, value, lab, tripwires, run_module, tmp_path):
    if value == 'PLAIN_FILE':
        value = str(lab['plain'])
    elif value == 'EXT4_DIR':
        if shm_reclaim.filesystem_type(str(tmp_path)) == 'tmpfs':
            pytest.skip('the test directory is on tmpfs here')
        value = str(tmp_path)
    args = {'path': lab['shm']}
    args[option] = value
    refused(run_module, shm_reclaim, args, option)


# ------------------------------------------------------------------ gpu_facts

GPU_FACTS_CASES = (
    cases('nvidia_smi_path', ['relative/nvidia-smi', '/nonexistent/nvidia-smi', '/', 'NOT_EXECUTABLE']
          + with_control('/usr/bin/nvidia-smi')[:3])
    + cases('command_timeout', COMMAND_TIMEOUT_BAD)
    + cases('query_gpus', ['maybe'])
)


@pytest.mark.parametrize('option, value', GPU_FACTS_CASES)
def test_gpu_facts_refuses(option, value, lab, tripwires, run_module):
    if value == 'NOT_EXECUTABLE':
        value = str(lab['not_executable'])
    args = {'nvidia_smi_path': str(lab['bin'] / 'nvidia-smi')}
    args[option] = value
    refused(run_module, gpu_facts, args, option)


# ------------------------------------------------------------------ pct_container

PCT_CASES = (
    cases('vmid', VMID_BAD)
    + cases('shm_size', ['64G\n', '\n64G', '64G\nlxc.mount.entry: /x y none bind 0 0', '64G\r', '0', '64GB', '-1',
                         '', 'big', '64 G', '1.5G', '64G;', '64P'])
    + cases('hostname', ['a b', 'host\n', '-host', 'host-', 'a' * 64, 'host_name', 'x..y', '', 'host;rm', 'h\x00'])
    + cases('storage', ['local lvm', 'local\n', '-x', '', 'a:b', 'x/y', 'local-'])
    + cases('ostemplate', ['x', 'local:vztmpl/a b.tar', '-rf', 'local:vztmpl/x.tar\n', 'relative/path.tar', ''])
    + cases('rootfs_size', [0, -5, True, 10 ** 9, 'abc', 'nan'])
    + cases('cores', [0, -1, True, 8193, 'x', 1.5])
    + cases('memory', [0, 15, -1, True, 10 ** 12])
    + cases('swap', [-1, True, 10 ** 12])
    + cases('timeout', [-1, 86401, True, 'x'])
    + cases('command_timeout', [0, 3601, True, -1])
    + cases('ssh_public_keys', [['ssh-ed25519 AAAAC3Nz\nssh-rsa AAAAB3Nz'], ['not a key'], [''], ['ssh-ed25519'],
                                ['ssh-rsa AAAA$$$'], ['ssh-ed25519 AAAAC3Nz\x00']])
    + cases('net', [{'net0': 'name=eth0\n,bridge=vmbr0'}, {'net99': 'name=eth0'}, {'eth0': 'name=eth0'},
                    {'net0': 'bridge=vmbr0'}, {'net0': 5}, {'net0\n': 'name=eth0'},
                    {'net0': {'name': 'eth0', 'bridge': 'vmbr0\n'}}])
    + cases('features', [{'bogus': True}, 'nesting=1\n', 5, 'nesting=maybe'])
    + cases('devices', [['/dev/null\n'], ['/etc/passwd'], ['/dev/nonexistent-device'], ['relative'],
                        ['/dev/null', '/dev/null']])
    + cases('raw_lxc', [['lxc.x: y\nlxc.z: w'], ['notlxc: y'], ['lxc.x:'],
                        ['lxc.cgroup2.devices.allow: c 195:* rwm\r']])
    + cases('raw_lxc_owned_keys', [['notlxc'], ['lxc.x\n']])
    + cases('state', ['running', 'present\n'])
    + cases('pct_path', ['/', '/nonexistent/pct', 'NOT_EXECUTABLE', 'relative/pct', 'PCT\n'])
    + cases('conf_dir', ['relative/lxc', '/etc/pve/lxc\n'])
    + cases('allow_restart', ['maybe'])
    + cases('unprivileged', ['perhaps'])
    + cases('onboot', ['sometimes'])
)


@pytest.mark.parametrize('option, value', PCT_CASES)
def test_pct_container_refuses(option, value, lab, tripwires, run_module):
    if value == 'NOT_EXECUTABLE':
        value = str(lab['not_executable'])
    elif value == 'PCT\n':
        value = str(lab['bin'] / 'pct') + '\n'
    args = {'vmid': 101, 'pct_path': str(lab['bin'] / 'pct'), 'conf_dir': str(lab['conf_dir']),
            'ostemplate': 'local:vztmpl/debian-12.tar', 'storage': 'local-lvm'}
    args[option] = value
    result = refused(run_module, pct_container, args, option)
    assert not result.get('commands')


def test_good_values_pass_the_checks(lab, tripwires):
    """The counterpart: the base values the cases start from are accepted (so each case fails for its one bad value)."""
    assert port_reclaim.validate(dict(port=8000, address='127.0.0.1', signal_timeout=10.0, kill_timeout=10.0,
                                      command_timeout=60.0, vmid=101))[1] == []
    patterns, errors = process_reclaim.validate(dict(
        match=[r'^sglang::', r'(^|\s)-m\s+sglang\.launch_server(\s|$)'], gpu_holders=False, zombies=True, exclude=[7],
        gpu_memory_max_mib=0, gpu_wait_timeout=60.0, nvidia_smi_path=None, signal_timeout=10.0, kill_timeout=10.0,
        command_timeout=60.0, vmid=101))
    assert errors == [] and len(patterns) == 2
    assert shm_reclaim.validate(dict(path=lab['shm'], patterns=['nccl-*', 'psm_*'], min_age=0.0)) == []
    assert gpu_facts.validate(dict(nvidia_smi_path=str(lab['bin'] / 'nvidia-smi'), query_gpus=True,
                                   command_timeout=30.0)) == []
    params = dict(vmid=101, pct_path=str(lab['bin'] / 'pct'), conf_dir=str(lab['conf_dir']),
                  ostemplate='local:vztmpl/debian-12.tar', storage='local-lvm', hostname='kimi-extract-1',
                  shm_size='64T', cores=8, memory=2048, swap=0, rootfs_size=64, timeout=60, command_timeout=300,
                  ssh_public_keys=['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB user@host'])
    assert pct_container.option_errors(params) == []


def test_there_are_enough_cases():
    total = len(PORT_CASES) + len(PROCESS_CASES) + len(SHM_CASES) + len(GPU_FACTS_CASES) + len(PCT_CASES)
    assert total >= 200, total
