"""copy_tree in-process: the controller's list of files against a directory on the host - what
differs is named, modes and directories are set, staged files are moved into place after their
sha256 is checked, and nothing changes in check mode."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from ansible_collections.eagle3.extraction.plugins.modules import copy_tree


def entry(content):
    return {'size': len(content), 'sha256': hashlib.sha256(content).hexdigest()}


FILES = {'a.whl': b'wheel a', 'sub/b.whl': b'wheel bb'}


def listing():
    return dict((name, entry(content)) for name, content in FILES.items())


def call(run_module, dest, **extra):
    return run_module(copy_tree, dict({'src': '/controller/wheelhouse', 'dest': str(dest), 'files': listing()}, **extra))


def fill(dest, files=None):
    for name, content in (files or FILES).items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o644)


def test_a_directory_that_holds_every_file_is_left_alone_in_one_call(tmp_path, run_module):
    fill(tmp_path)
    result = call(run_module, tmp_path)
    assert not result.get('failed'), result
    assert result['changed'] is False and result['copied'] == [] and result['files'] == 2


def test_absent_and_different_files_are_named_and_the_directories_made(tmp_path, run_module):
    dest = tmp_path / 'wheelhouse'
    fill(dest, {'a.whl': b'wheel A'})  # same size, other content
    result = call(run_module, dest)
    assert result['changed'] and result['copied'] == ['a.whl', 'sub/b.whl']
    assert (dest / 'sub').is_dir() and stat.S_IMODE((dest / 'sub').stat().st_mode) == 0o755


def test_staged_files_are_moved_into_place_with_their_mode(tmp_path, run_module):
    dest, stage = tmp_path / 'wheelhouse', tmp_path / 'stage'
    stage.mkdir()
    staged = {}
    for number, (name, content) in enumerate(FILES.items()):
        (stage / str(number)).write_bytes(content)
        staged[name] = str(stage / str(number))
    call(run_module, dest)
    result = call(run_module, dest, staged=staged)
    assert not result.get('failed'), result
    assert (dest / 'sub' / 'b.whl').read_bytes() == b'wheel bb'
    assert stat.S_IMODE((dest / 'a.whl').stat().st_mode) == 0o644
    assert sorted(os.listdir(dest)) == ['a.whl', 'sub']  # no temporary file left
    assert call(run_module, dest)['changed'] is False


def test_a_staged_file_that_is_not_the_controllers_is_refused(tmp_path, run_module):
    dest, stage = tmp_path / 'wheelhouse', tmp_path / 'stage'
    fill(dest, {'sub/b.whl': b'wheel bb'})
    stage.mkdir()
    (stage / 'a').write_bytes(b'corrupt')
    result = call(run_module, dest, staged={'a.whl': str(stage / 'a')})
    assert result['failed'] and 'sha256' in result['msg']
    assert not (dest / 'a.whl').exists() and os.listdir(dest) == ['sub']


def test_a_wrong_mode_is_set_and_reported(tmp_path, run_module):
    fill(tmp_path)
    (tmp_path / 'a.whl').chmod(0o600)
    result = call(run_module, tmp_path)
    assert result['changed'] and result['modes_set'] == ['a.whl'] and result['copied'] == []
    assert stat.S_IMODE((tmp_path / 'a.whl').stat().st_mode) == 0o644


def test_check_mode_names_what_would_change_and_changes_nothing(tmp_path, run_module):
    dest = tmp_path / 'wheelhouse'
    result = call(run_module, dest, _ansible_check_mode=True)
    assert result['changed'] and result['copied'] == ['a.whl', 'sub/b.whl']
    assert not dest.exists()


@pytest.mark.parametrize('name', ['../escape.whl', '/etc/passwd'])
def test_a_path_outside_dest_is_refused(tmp_path, run_module, name):
    result = run_module(copy_tree, {'src': '/s', 'dest': str(tmp_path / 'd'), 'files': {name: entry(b'x')}})
    assert result['failed'] and 'not a path inside' in result['msg']
