"""The action plugin pct_list, in-process, its one shell command run by /bin/sh here as the node's shell would run
it: against a pct that prints pct list's table, fails, hangs or is missing, and configuration files whose
fingerprints must be converged_state's (and pct_container's) for the same files."""

from __future__ import annotations

import subprocess
from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.eagle3.extraction.plugins.action import pct_list
from ansible_collections.eagle3.extraction.plugins.module_utils.file_digest import fingerprint

TABLE = ("VMID       Status     Lock         Name                \n"
         "101        running                 ct1                 \n"
         "102        stopped    backup       ct2                 \n")


@pytest.fixture
def fake_pct(tmp_path):
    def make(stdout='', stderr='', rc=0, sleep=0):
        path = tmp_path / 'pct'
        (tmp_path / 'out').write_text(stdout)
        (tmp_path / 'err').write_text(stderr)
        path.write_text('#!/bin/sh\n[ "$1" = list ] || exit 99\nsleep %d\ncat "%s"\ncat "%s" >&2\nexit %d\n'
                        % (sleep, tmp_path / 'out', tmp_path / 'err', rc))
        path.chmod(0o755)
        return str(path)
    return make


def run(args, check_mode=False):
    """The action's result, its command run by /bin/sh as _low_level_execute_command runs it on the node; and
    the commands it ran."""
    task = mock.MagicMock(args=args, async_val=0, check_mode=check_mode, diff=False,
                          action='eagle3.extraction.pct_list')
    plugin = pct_list.ActionModule(task, mock.MagicMock(), mock.MagicMock(check_mode=check_mode), DataLoader(),
                                   Templar(loader=DataLoader(), variables={}), None)
    commands = []

    def execute(command, sudoable=True):
        commands.append(command)
        done = subprocess.run(['/bin/sh', '-c', command], capture_output=True, text=True, timeout=60, check=False)
        return {'rc': done.returncode, 'stdout': done.stdout, 'stderr': done.stderr}
    plugin._low_level_execute_command = execute
    return plugin.run(task_vars={}), commands


def test_the_containers_and_those_that_run(fake_pct, tmp_path):
    result, commands = run({'pct_path': fake_pct(TABLE), 'conf_dir': str(tmp_path)})
    assert not result.get('failed'), result
    assert result['changed'] is False and result['rc'] == 0
    assert result['containers'] == {'101': {'status': 'running', 'lock': '', 'name': 'ct1'},
                                    '102': {'status': 'stopped', 'lock': 'backup', 'name': 'ct2'}}
    assert result['running'] == [101]
    # one command on the node, whatever it holds
    assert len(commands) == 1


def test_it_reads_in_check_mode(fake_pct, tmp_path):
    result, dummy = run({'pct_path': fake_pct(TABLE), 'conf_dir': str(tmp_path)}, check_mode=True)
    assert result['running'] == [101]


def test_each_configuration_is_fingerprinted_as_converged_state_and_pct_container_do(fake_pct, tmp_path, run_module):
    from ansible_collections.eagle3.extraction.plugins.modules import converged_state
    conf_dir = tmp_path / 'lxc'
    conf_dir.mkdir()
    (conf_dir / '101.conf').write_text('cores: 2\n')
    (conf_dir / 'notes.txt').write_text('not a configuration\n')
    result, dummy = run({'pct_path': fake_pct(TABLE), 'conf_dir': str(conf_dir)})
    digest = run_module(converged_state, {'mode': 'digest', 'files': [str(conf_dir / '101.conf')]})
    assert result['config_states']['101'] == digest['state'] == fingerprint({'files': [str(conf_dir / '101.conf')]})
    # a missing configuration (102) counts as absent, not an error
    assert result['config_states']['102'] == fingerprint({'files': [str(conf_dir / '102.conf')]})
    before = result['config_states']
    (conf_dir / '101.conf').write_text('cores: 4\n')
    after = run({'pct_path': fake_pct(TABLE), 'conf_dir': str(conf_dir)})[0]['config_states']
    assert after['101'] != before['101'] and after['102'] == before['102']
    assert sorted(after) == ['101', '102']


def test_a_conf_dir_given_with_a_slash_at_its_end_is_the_same_path_pct_container_names(fake_pct, tmp_path):
    (tmp_path / '101.conf').write_text('cores: 2\n')
    result, dummy = run({'pct_path': fake_pct(TABLE), 'conf_dir': str(tmp_path) + '/'})
    assert result['config_states']['101'] == fingerprint({'files': [str(tmp_path) + '/101.conf']})


def test_a_node_without_containers(fake_pct, tmp_path):
    result, dummy = run({'pct_path': fake_pct(''), 'conf_dir': str(tmp_path)})
    assert (result['containers'], result['running'], result['config_states']) == ({}, [], {})


def test_output_without_a_newline_at_its_end_is_read(fake_pct, tmp_path):
    result, dummy = run({'pct_path': fake_pct(TABLE.rstrip('\n')), 'conf_dir': str(tmp_path)})
    assert result['running'] == [101] and sorted(result['containers']) == ['101', '102']


def test_a_failing_pct_fails_with_its_exit_code_and_error(fake_pct, tmp_path):
    result, dummy = run({'pct_path': fake_pct('', 'ipcc_send_rec[1] failed: Connection refused\n', 2),
                         'conf_dir': str(tmp_path)})
    assert result['failed'] and result['rc'] == 2
    assert 'Connection refused' in result['stderr'] and 'exit code 2' in result['msg']


def test_a_missing_pct_fails_naming_it(tmp_path):
    result, dummy = run({'pct_path': str(tmp_path / 'nope'), 'conf_dir': str(tmp_path)})
    assert result['failed'] and result['rc'] is None
    assert result['msg'].startswith('pct_path %s cannot be run (exit code 127)' % (tmp_path / 'nope')), result['msg']


def test_a_hung_pct_is_killed_at_its_timeout(fake_pct, tmp_path):
    result, dummy = run({'pct_path': fake_pct(TABLE, sleep=30), 'conf_dir': str(tmp_path), 'command_timeout': 1})
    assert result['failed'] and result['rc'] is None
    assert 'did not finish within its timeout of 1 seconds' in result['msg']


def test_output_pct_does_not_print_is_refused(fake_pct, tmp_path):
    result, dummy = run({'pct_path': fake_pct('VMID Status Lock Name\nnot a row\n'), 'conf_dir': str(tmp_path)})
    assert result['failed'] and 'unexpected line in the output of pct list' in result['msg']


def test_a_shell_that_printed_nothing_of_the_listing_fails_with_what_it_said():
    answer = {'rc': 127, 'stdout': '', 'stderr': 'sh: 1: timeout: not found\n'}
    result = pct_list.read_answer({'pct_path': '/usr/sbin/pct', 'conf_dir': '/etc/pve/lxc', 'command_timeout': 120},
                                  'marker', answer)
    assert result['failed'] and result['msg'] == (
        'the node did not run /usr/sbin/pct list (exit code 127): sh: 1: timeout: not found')


@pytest.mark.parametrize('args, named', [
    ({'pct_path': 'pct'}, "pct_path: 'pct' is not an absolute path"),
    ({'pct_path': '/usr/sbin/pct\n'}, "pct_path: '/usr/sbin/pct\\n' is not an absolute path"),
    ({'conf_dir': 'etc/pve/lxc'}, "conf_dir: 'etc/pve/lxc' is not an absolute path"),
    ({'command_timeout': 0}, 'command_timeout: 0 is not a number of seconds from 1 to 86400'),
    ({'command_timeout': 'soon'}, 'command_timeout'),
    ({'pcp_path': '/usr/sbin/pct'}, 'pcp_path'),
])
def test_bad_values_are_refused_naming_them_before_the_node_is_contacted(args, named):
    result, commands = run(args)
    assert result['failed'] and result['msg'].startswith('pct_list: ') and named in result['msg'], result['msg']
    assert commands == []


def test_every_value_in_the_command_is_quoted(tmp_path):
    command = pct_list.shell_command({'pct_path': "/opt/my pct;rm -rf /", 'conf_dir': "/etc/pve/lxc'x",
                                      'command_timeout': 120}, 'marker')
    assert "'/opt/my pct;rm -rf /' list" in command
    assert "sha256sum -- '/etc/pve/lxc'\"'\"'x'/*.conf" in command
