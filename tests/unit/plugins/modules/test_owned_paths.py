"""owned_paths: a dir, a file or a unit that exists and is another's is refused, naming the variable and the
path; what does not exist yet or is the role's already passes. Real paths under tmp_path, in-process."""

from __future__ import annotations

import os

import pytest
from ansible_collections.eagle3.extraction.plugins.modules import owned_paths

NOBODY = 65534
MARKER = 'Description=EAGLE-3 extraction job %i (feeds the SGLang server, drains its dumps)'
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='makes paths of another owner (needs root)')


def want(path, mode, variable='v'):
    return {'variable': variable, 'path': str(path), 'mode': mode, 'owner': 'root', 'group': 'root'}


def made(path, mode, uid=0, gid=0, directory=True):
    if directory:
        path.mkdir()
    else:
        path.write_text('x\n')
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path


def test_what_does_not_exist_or_is_the_roles_passes(tmp_path):
    assert owned_paths.dir_errors([want(tmp_path / 'new', '0755'),
                                   want(made(tmp_path / 'mine', 0o700), '0700')]) == []
    assert owned_paths.file_errors([want(tmp_path / 'new.key', '0600'),
                                    want(made(tmp_path / 'mine.key', 0o600, directory=False), '0600')]) == []


@pytest.mark.parametrize('uid,gid,mode,shown', [
    (NOBODY, NOBODY, 0o700, 'a directory nobody:'),         # another user's 0700 dir
    (0, NOBODY, 0o2755, 'a directory root:'),               # /var/log/journal: another group
    (0, 0, 0o755, 'a directory root:root 0755; the role makes it a directory root:root 0700'),
])
def test_a_dir_that_is_another_s_is_refused(tmp_path, uid, gid, mode, shown):
    path = made(tmp_path / 'd', mode, uid, gid)
    errors = owned_paths.dir_errors([want(path, '0700', 'extraction_job_log_dir')])
    assert len(errors) == 1 and errors[0].startswith('extraction_job_log_dir=%s exists' % path) and shown in errors[0]


def test_a_file_or_a_link_to_another_s_dir_where_a_dir_goes_is_refused(tmp_path):
    made(tmp_path / 'f', 0o755, directory=False)
    os.symlink(made(tmp_path / 'theirs', 0o700, NOBODY, NOBODY), tmp_path / 'link')
    errors = owned_paths.dir_errors([want(tmp_path / 'f', '0755'), want(tmp_path / 'link', '0700')])
    assert 'a file root:root' in errors[0] and 'a directory (through a link) nobody' in errors[1], errors


def test_a_key_file_that_is_not_the_roles_is_refused(tmp_path):
    secret = made(tmp_path / 'secret', 0o600, directory=False)
    os.symlink(secret, tmp_path / 'link.key')
    os.link(secret, tmp_path / 'hard.key')
    made(tmp_path / 'theirs.key', 0o600, NOBODY, NOBODY, directory=False)
    made(tmp_path / 'open.key', 0o644, directory=False)
    os.mkfifo(tmp_path / 'fifo.key')
    errors = owned_paths.file_errors([want(tmp_path / name, '0600') for name in (
        'link.key', 'hard.key', 'theirs.key', 'open.key', 'fifo.key')])
    assert [error.split(': ', 1)[1].split(' ', 2)[:2] for error in errors] == [
        ['a', 'link'], ['a', 'file'], ['a', 'file'], ['a', 'file'], ['a', 'FIFO']], errors
    assert 'with 2 names' in errors[1] and 'nobody:' in errors[2] and '0644' in errors[3]


def test_a_unit_the_system_has_or_one_without_the_marker_is_refused(tmp_path):
    system, mine = tmp_path / 'lib', tmp_path / 'etc'
    system.mkdir()
    mine.mkdir()
    (system / 'user@.service').write_text('[Unit]\nDescription=User Manager for UID %i\n')
    (mine / 'other@.service').write_text('[Unit]\nDescription=something else\n')
    (mine / 'ours@.service').write_text('# Ansible managed\n[Unit]\n%s\n' % MARKER)
    units = [{'variable': 'extraction_job_unit', 'name': name, 'dir': str(mine), 'marker': MARKER}
             for name in ('user@.service', 'other@.service', 'ours@.service', 'new@.service')]
    errors = owned_paths.unit_errors(units, [str(mine), str(system)])
    assert len(errors) == 2, errors
    assert errors[0] == ("extraction_job_unit gives the unit user@.service, which is not this role's: systemd has it "
                         "already (%s/user@.service). Nothing was changed: give extraction_job_unit a name no unit "
                         "has" % system)
    assert errors[1].startswith('extraction_job_unit gives the unit file %s/other@.service' % mine)


def test_the_module_fails_naming_each_and_changes_nothing(tmp_path, run_module):
    theirs = made(tmp_path / 'theirs', 0o700, NOBODY, NOBODY)
    result = run_module(owned_paths, {'dirs': [want(theirs, '0755', 'extraction_job_data_dir')],
                                      'files': [want(tmp_path / 'none.key', '0600')], '_ansible_check_mode': True})
    assert result['failed'] and not result['changed'] and len(result['errors']) == 1
    assert 'extraction_job_data_dir=%s' % theirs in result['msg']
    assert os.stat(theirs).st_uid == NOBODY
    passed = run_module(owned_paths, {'dirs': [want(tmp_path / 'new', '0755')]})
    assert not passed.get('failed') and passed['errors'] == [] and not passed['changed']
