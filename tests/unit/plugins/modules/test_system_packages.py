"""system_packages: dpkg-query is read first; apt-get runs for the missing packages alone, never when none is
missing (a host without an apt index then works), never in check mode; a bad name is refused before anything runs.
A dpkg-query and an apt-get on PATH play dpkg: installed packages are lines of a file, apt-get's calls are logged."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import system_packages

DPKG_QUERY = '''#!/bin/sh
for last; do :; done
if grep -qx "$last" "%(db)s"; then printf installed; exit 0; fi
echo "dpkg-query: no packages found matching $last" >&2; exit 1
'''
APT_GET = '''#!/bin/sh
echo "$*" >> "%(log)s"
exit "$(cat "%(rc)s")"
'''


@pytest.fixture
def dpkg(tmp_path, monkeypatch):
    paths = dict(db=tmp_path / 'db', log=tmp_path / 'log', rc=tmp_path / 'rc')
    paths['db'].write_text('libcurl4\n')
    paths['log'].write_text('')
    paths['rc'].write_text('0')
    for name, text in (('dpkg-query', DPKG_QUERY), ('apt-get', APT_GET)):
        (tmp_path / name).write_text(text % paths)
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (tmp_path, os.environ['PATH']))
    return paths


def run(args, capsys, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            system_packages.main()
    return json.loads(capsys.readouterr().out)


def test_only_the_missing_packages_are_installed(dpkg, capsys):
    result = run({'names': ['libcurl4', 'libnuma1', 'libibverbs1']}, capsys)
    assert result['changed'] and result['missing'] == ['libnuma1', 'libibverbs1']
    assert dpkg['log'].read_text().splitlines() == ['install -y -q --no-install-recommends libnuma1 libibverbs1']


def test_nothing_runs_when_every_package_is_there(dpkg, capsys):
    result = run({'names': ['libcurl4']}, capsys)
    assert not result['changed'] and result['missing'] == []
    assert dpkg['log'].read_text() == ''


def test_check_mode_says_what_it_would_install_and_runs_nothing(dpkg, capsys):
    result = run({'names': ['libnuma1']}, capsys, check_mode=True)
    assert result['changed'] and result['missing'] == ['libnuma1']
    assert dpkg['log'].read_text() == ''


def test_a_failed_install_fails_naming_the_packages(dpkg, capsys):
    dpkg['rc'].write_text('100')
    result = run({'names': ['libnuma1']}, capsys)
    assert result['failed'] and 'apt-get install libnuma1 failed (rc 100)' in result['msg']


@pytest.mark.parametrize('name', ['-o', 'Dpkg::Options::=--force-all', 'lib numa', 'LIBNUMA1', 'a\nb'])
def test_a_bad_name_is_refused_before_anything_runs(dpkg, capsys, name):
    result = run({'names': ['libcurl4', name]}, capsys)
    assert result['failed'] and 'is not a Debian package name' in result['msg']
    assert dpkg['log'].read_text() == ''
