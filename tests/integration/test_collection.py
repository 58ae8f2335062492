"""The collection builds, installs and documents its modules. (Its main playbook runs by
FQCN from the installed copy in test_rollout.py.)"""

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
