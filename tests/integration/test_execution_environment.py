"""execution-environment.yml: `ansible-builder create` writes a build context that installs
ansible-core at the collection's pin, this collection from its tarball, community.proxmox,
and the Python and system packages the collection declares. The image itself needs a base
image these machines cannot fetch; the stages that need no network are run here on the
context: the galaxy stage's install (offline) and builder's own introspection of it."""

import os
import re
import shutil

import pytest

from collection_helpers import REPO, dependencies_path, run

TARBALL = 'eagle3-extraction-0.1.0.tar.gz'


@pytest.fixture(scope='module')
def context(tmp_path_factory):
    """The build context, from a copy of the checkout with the collection's tarball in it."""
    work = tmp_path_factory.mktemp('ee')
    tree = work / 'tree'
    shutil.copytree(REPO, tree, symlinks=True,
                    ignore=shutil.ignore_patterns('.venv*', '.ansible', '.git', 'tests', '*.tar.gz'))
    built = run(['ansible-galaxy', 'collection', 'build', '--output-path', str(tree), str(tree)])
    assert built.returncode == 0, built.stderr
    created = run(['ansible-builder', 'create', '--output-filename', 'Containerfile',
                   '-c', str(work / 'context')], cwd=str(tree))
    assert created.returncode == 0, created.stdout + created.stderr
    return work / 'context'


def pin(name):
    with open(os.path.join(REPO, 'requirements-dev.txt'), encoding='utf-8') as f:
        return re.search(rf'^{re.escape(name)}==(\S+)$', f.read(), re.M).group(1)


def test_containerfile_installs_ansible_core_and_runner_at_the_pins(context):
    containerfile = (context / 'Containerfile').read_text(encoding='utf-8')
    assert f'ansible-core=={pin("ansible-core")} ansible-runner=={pin("ansible-runner")}' in containerfile
    assert 'ansible-galaxy collection install' in containerfile
    assert (context / '_build' / 'collections' / TARBALL).is_file()


def test_galaxy_stage_installs_the_collection_and_its_dependency(context, tmp_path):
    """The galaxy stage's own command, in the context's _build as the image runs it (there with
    Galaxy; here --offline, community.proxmox found among the checkout's collections)."""
    dest = tmp_path / 'collections'
    installed = run(['ansible-galaxy', 'collection', 'install', '--offline', '-r', 'requirements.yml',
                     '--collections-path', str(dest)], cwd=str(context / '_build'),
                    env={'ANSIBLE_COLLECTIONS_PATH': os.pathsep.join(
                        [str(dest), dependencies_path(tmp_path / 'depends')])})
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (dest / 'ansible_collections' / 'eagle3' / 'extraction' / 'MANIFEST.json').is_file()
    assert "community.proxmox" in installed.stdout

    # builder's introspection over what the galaxy stage installed: the packages the final
    # image gets from the collection's meta/execution-environment.yml
    pip_out, bindep_out = tmp_path / 'pip.txt', tmp_path / 'bindep.txt'
    introspected = run(['python3', str(context / '_build' / 'scripts' / 'introspect.py'), 'introspect',
                        '--write-pip', str(pip_out), '--write-bindep', str(bindep_out), str(dest)])
    assert introspected.returncode == 0, introspected.stdout + introspected.stderr
    wanted = pip_out.read_text(encoding='utf-8')
    assert f'setuptools=={pin("setuptools")}' in wanted and f'paramiko=={pin("paramiko")}' in wanted
    assert 'openssh-clients' in bindep_out.read_text(encoding='utf-8')
