"""converged_inputs: the controller's fingerprint of a host's inputs changes exactly when one of
its role variables or one of the collection's files changes."""

from __future__ import annotations

import os
import shutil

import pytest
from ansible_collections.eagle3.extraction.plugins.plugin_utils import converged_inputs
from ansible_collections.eagle3.extraction.plugins.plugin_utils.converged_inputs import (
    code_sha256, collection_code_sha256, input_names, inputs_sha256)


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
    seen = {code_sha256(dirs(tree))}
    (tree / 'plugins' / '__pycache__').mkdir()
    (tree / 'plugins' / '__pycache__' / 'm.cpython-312.pyc').write_bytes(b'\0')
    (tree / 'plugins' / 'n.pyc').write_bytes(b'\0')
    assert code_sha256(dirs(tree)) in seen
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
        value = code_sha256(dirs(tree))
        assert value not in seen
        seen.add(value)


def test_the_same_files_elsewhere_give_the_same_value(tree, tmp_path_factory):
    other = tmp_path_factory.mktemp('copy')
    shutil.copytree(tree, other, dirs_exist_ok=True)
    assert code_sha256(dirs(other)) == code_sha256(dirs(tree))
    # a file moved from one directory to the other is a change
    (other / 'plugins' / 'm.py').rename(other / 'roles' / 'm.py')
    assert code_sha256(dirs(other)) != code_sha256(dirs(tree))


def test_missing_directory_is_empty_and_a_relative_one_is_refused(tmp_path):
    assert code_sha256([str(tmp_path / 'none')]) == code_sha256([str(tmp_path / 'also-none')])
    with pytest.raises(ValueError, match='absolute'):
        code_sha256(['relative/dir'])


def test_the_collection_fingerprints_its_own_playbooks_roles_and_plugins(tmp_path):
    root = converged_inputs.ROOT
    assert all(os.path.isdir(os.path.join(root, name)) for name in converged_inputs.CODE_DIRS)
    # a copy of the collection with one task changed is another version
    for name in converged_inputs.CODE_DIRS:
        shutil.copytree(os.path.join(root, name), str(tmp_path / name),
                        ignore=shutil.ignore_patterns('__pycache__'))
    assert collection_code_sha256(str(tmp_path)) == collection_code_sha256()
    (tmp_path / 'playbooks' / 'extract.yml').write_text('---\n')
    assert collection_code_sha256(str(tmp_path)) != collection_code_sha256()


def test_only_the_roles_variables_are_inputs():
    names = ['sglang_server_port', 'ml_env_packages', 'extraction_job_name', 'ansible_host', 'sglang_serverx',
             '__extract_stamp', 'proxmox_container_vmid', 'other_sglang_server_port']
    assert input_names(names, ['sglang_server', 'ml_env', 'proxmox_container', 'extraction_job']) == [
        'extraction_job_name', 'ml_env_packages', 'proxmox_container_vmid', 'sglang_server_port']


def test_a_changed_value_or_code_is_another_fingerprint():
    base = inputs_sha256({'sglang_server_port': 8000, 'sglang_server_flags': {'a': 1, 'b': 2}}, 'code1')
    assert inputs_sha256({'sglang_server_flags': {'b': 2, 'a': 1}, 'sglang_server_port': 8000}, 'code1') == base
    assert inputs_sha256({'sglang_server_port': 30000, 'sglang_server_flags': {'a': 1, 'b': 2}}, 'code1') != base
    assert inputs_sha256({'sglang_server_port': 8000, 'sglang_server_flags': {'a': 1, 'b': 2}}, 'code2') != base


def test_what_extract_yml_reads_before_the_check_is_not_an_input():
    """The dataset report (tasks_from: dataset) is published before the converged check, and its
    manifests' pins change as the job runs: named as an input, no host would ever be converged."""
    import yaml  # pylint: disable=import-outside-toplevel
    path = os.path.join(converged_inputs.ROOT, 'roles', 'extraction_job', 'tasks', 'dataset.yml')
    with open(path) as handle:
        tasks = yaml.safe_load(handle)
    published = [name for task in tasks for name in task.get('ansible.builtin.set_fact', {})]
    roles = ['proxmox_container', 'gpu_check', 'ml_env', 'sglang_patch', 'sglang_server', 'extraction_job']
    assert published and input_names(published, roles) == []
