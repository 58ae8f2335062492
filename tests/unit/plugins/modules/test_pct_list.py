"""pct_list in-process against a pct that prints pct list's table, fails or is missing."""

from __future__ import annotations

import pytest

from ansible_collections.eagle3.extraction.plugins.modules import pct_list

TABLE = ("VMID       Status     Lock         Name                \n"
         "101        running                 ct1                 \n"
         "102        stopped    backup       ct2                 \n")


@pytest.fixture
def fake_pct(tmp_path):
    def make(stdout='', stderr='', rc=0):
        path = tmp_path / 'pct'
        (tmp_path / 'out').write_text(stdout)
        (tmp_path / 'err').write_text(stderr)
        path.write_text('#!/bin/sh\n[ "$1" = list ] || exit 99\ncat "%s"\ncat "%s" >&2\nexit %d\n'
                        % (tmp_path / 'out', tmp_path / 'err', rc))
        path.chmod(0o755)
        return str(path)
    return make


def test_the_containers_and_those_that_run(fake_pct, run_module):
    result = run_module(pct_list, {'pct_path': fake_pct(TABLE)})
    assert not result.get('failed'), result
    assert result['changed'] is False
    assert result['containers'] == {'101': {'status': 'running', 'lock': '', 'name': 'ct1'},
                                    '102': {'status': 'stopped', 'lock': 'backup', 'name': 'ct2'}}
    assert result['running'] == [101]


def test_it_reads_in_check_mode(fake_pct, run_module):
    result = run_module(pct_list, {'pct_path': fake_pct(TABLE), '_ansible_check_mode': True})
    assert result['running'] == [101]


def test_a_failing_pct_fails_with_its_exit_code_and_error(fake_pct, run_module):
    result = run_module(pct_list, {'pct_path': fake_pct('', 'ipcc_send_rec[1] failed: Connection refused\n', 2)})
    assert result['failed'] and result['rc'] == 2
    assert 'Connection refused' in result['stderr'] and 'exit code 2' in result['msg']


def test_a_missing_pct_fails_naming_it(tmp_path, run_module):
    result = run_module(pct_list, {'pct_path': str(tmp_path / 'nope')})
    assert result['failed'] and 'cannot be run' in result['msg']


def test_each_containers_configuration_is_fingerprinted_as_converged_state_digests_it(fake_pct, tmp_path, run_module):
    from ansible_collections.eagle3.extraction.plugins.modules import converged_state
    conf_dir = tmp_path / 'lxc'
    conf_dir.mkdir()
    (conf_dir / '101.conf').write_text('cores: 2\n')
    result = run_module(pct_list, {'pct_path': fake_pct(TABLE), 'conf_dir': str(conf_dir)})
    digest = run_module(converged_state, {'mode': 'digest', 'files': [str(conf_dir / '101.conf')]})
    assert result['config_states']['101'] == digest['state']
    before = result['config_states']
    # a changed configuration is another fingerprint; a missing one (102) counts as absent, not an error
    (conf_dir / '101.conf').write_text('cores: 4\n')
    after = run_module(pct_list, {'pct_path': fake_pct(TABLE), 'conf_dir': str(conf_dir)})['config_states']
    assert after['101'] != before['101'] and after['102'] == before['102']
    assert sorted(after) == ['101', '102']
