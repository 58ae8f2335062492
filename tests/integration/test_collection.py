"""The collection builds, installs and documents its modules. (Its main playbook runs by
FQCN from the installed copy in test_rollout.py.)"""

import json
import os
import re

from collection_helpers import REPO, installed, run  # noqa: F401  pylint: disable=unused-import


def test_tarball_leaves_out_tests_and_dev_files(installed):
    root = installed / 'ansible_collections' / 'eagle3' / 'extraction'
    shipped = set(os.listdir(str(root)))
    assert {'galaxy.yml', 'MANIFEST.json', 'playbooks', 'plugins', 'roles', 'meta'} - {'galaxy.yml'} <= shipped
    assert not shipped & {'tests', 'molecule', '.venv', 'Makefile', '.ci', 'ansible.cfg'}


def test_ansible_doc_lists_every_module(installed):
    result = run(['ansible-doc', '-l', 'eagle3.extraction'], cwd=str(installed),
                 env={'ANSIBLE_COLLECTIONS_PATH': str(installed)})
    assert result.returncode == 0, result.stderr
    listed = set(re.findall(r'^eagle3\.extraction\.(\w+)', result.stdout, re.M))
    modules = {f[:-3] for f in os.listdir(os.path.join(REPO, 'plugins', 'modules'))
               if f.endswith('.py') and not f.startswith('_')}
    assert listed == modules


ROLES = sorted(d for d in os.listdir(os.path.join(REPO, 'roles'))
               if os.path.isfile(os.path.join(REPO, 'roles', d, 'meta', 'argument_specs.yml')))


def test_ansible_doc_documents_every_role(installed):
    """What a Galaxy user reads first: `ansible-doc -t role` of each role, from the installed copy."""
    env = {'ANSIBLE_COLLECTIONS_PATH': str(installed), 'ANSIBLE_NOCOLOR': '1'}
    listed = run(['ansible-doc', '-t', 'role', '-l', 'eagle3.extraction'], cwd=str(installed), env=env)
    assert listed.returncode == 0, listed.stderr
    assert set(re.findall(r'^eagle3\.extraction\.(\w+)', listed.stdout, re.M)) == set(ROLES)
    for role in ROLES:
        shown = run(['ansible-doc', '-t', 'role', f'eagle3.extraction.{role}'], cwd=str(installed), env=env)
        assert shown.returncode == 0, (role, shown.stderr)
        assert 'ENTRY POINT: *main*' in shown.stdout, (role, shown.stdout[:400])
        assert f'{role}_' in shown.stdout, (role, 'no variable of the role shown')


def test_main_playbook_by_fqcn_passes_syntax_check(installed, tmp_path):
    """`ansible-playbook eagle3.extraction.extract` resolves from the installed copy alone (no
    ansible.cfg, no checkout on the path)."""
    result = run(['ansible-playbook', 'eagle3.extraction.extract', '--syntax-check', '-i', 'localhost,'],
                 cwd=str(tmp_path), env={'ANSIBLE_COLLECTIONS_PATH': str(installed)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'playbook: ' in result.stdout


def test_installed_copy_declares_its_dependencies(installed):
    manifest = installed / 'ansible_collections' / 'eagle3' / 'extraction' / 'MANIFEST.json'
    info = json.loads(manifest.read_text(encoding='utf-8'))['collection_info']
    assert 'community.proxmox' in info['dependencies']
    for key in ('repository', 'documentation', 'issues', 'homepage'):
        assert info[key], key
    assert info['tags'], 'Galaxy search needs tags'


def test_reclaim_action_group_sets_the_shared_options(installed, tmp_path):
    """meta/runtime.yml's action group: module_defaults for group/eagle3.extraction.reclaim reach
    port_reclaim and process_reclaim (here a signal_timeout out of range, refused naming it)."""
    play = tmp_path / 'group.yml'
    play.write_text(
        '- hosts: localhost\n'
        '  gather_facts: false\n'
        '  module_defaults:\n'
        '    group/eagle3.extraction.reclaim: {signal_timeout: 7200}\n'
        '  tasks:\n'
        '    - {eagle3.extraction.port_reclaim: {port: 1}, ignore_errors: true, register: port}\n'
        '    - {eagle3.extraction.process_reclaim: {match: [no-such-process-x]}, ignore_errors: true, register: proc}\n'
        '    - ansible.builtin.assert:\n'
        '        that:\n'
        '          - port is failed and "signal_timeout" in port.msg and "7200" in port.msg\n'
        '          - proc is failed and "signal_timeout" in proc.msg and "7200" in proc.msg\n',
        encoding='utf-8')
    result = run(['ansible-playbook', '-i', 'localhost,', '-c', 'local', '--check',
                  '-e', 'ansible_python_interpreter=/usr/bin/python3', str(play)], cwd=str(tmp_path),
                 env={'ANSIBLE_COLLECTIONS_PATH': str(installed)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
