"""files_sha256 changes exactly when a file under the directories changes."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.eagle3.extraction.plugins.filter.files_sha256 import files_sha256


@pytest.fixture
def tree(tmp_path):
    (tmp_path / 'roles' / 'a' / 'tasks').mkdir(parents=True)
    (tmp_path / 'roles' / 'a' / 'tasks' / 'main.yml').write_text('---\n')
    (tmp_path / 'plugins').mkdir()
    (tmp_path / 'plugins' / 'm.py').write_text('x = 1\n')
    return tmp_path


def dirs(tree):
    return [str(tree / 'roles'), str(tree / 'plugins')]


def test_each_change_gives_another_value_and_bytecode_does_not_count(tree):
    seen = {files_sha256(dirs(tree))}
    (tree / 'plugins' / '__pycache__').mkdir()
    (tree / 'plugins' / '__pycache__' / 'm.cpython-312.pyc').write_bytes(b'\0')
    (tree / 'plugins' / 'n.pyc').write_bytes(b'\0')
    assert files_sha256(dirs(tree)) in seen
    changes = [
        ((tree / 'plugins' / 'm.py').write_text, 'x = 2\n'),
        ((tree / 'plugins' / 'new.py').write_text, ''),
        ((tree / 'plugins' / 'new.py').rename, tree / 'plugins' / 'renamed.py'),
        ((tree / 'roles' / 'a' / 'tasks' / 'main.yml').unlink, None),
    ]
    for change, argument in changes:
        if argument is None:
            change()
        else:
            change(argument)
        value = files_sha256(dirs(tree))
        assert value not in seen
        seen.add(value)


def test_the_same_files_elsewhere_give_the_same_value(tree, tmp_path_factory):
    import shutil
    other = tmp_path_factory.mktemp('copy')
    shutil.copytree(tree, other, dirs_exist_ok=True)
    assert files_sha256(dirs(other)) == files_sha256(dirs(tree))
    # a file moved from one directory to the other is a change
    (other / 'plugins' / 'm.py').rename(other / 'roles' / 'm.py')
    assert files_sha256(dirs(other)) != files_sha256(dirs(tree))


def test_missing_directory_is_empty_and_bad_input_is_refused(tmp_path):
    assert files_sha256([str(tmp_path / 'none')]) == files_sha256([str(tmp_path / 'also-none')])
    for bad in ('/etc', ['relative/dir'], None):
        with pytest.raises(AnsibleFilterError):
            files_sha256(bad)
