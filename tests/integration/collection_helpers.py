"""Shared by the integration tests: the controller venv on PATH, and the collection as a
user gets it (built to a tarball and installed elsewhere)."""

import os
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
VENV_BIN = os.path.join(REPO, '.venv', 'bin')
# the collections galaxy.yml depends on, as the bootstrap unpacked them (no Galaxy here)
DEPENDS_ON = (('community', 'proxmox'),)


def dependencies_path(where):
    """A collections path under `where` that holds only the collection's dependencies, so that
    an offline install finds them there and still installs eagle3.extraction itself."""
    for namespace, name in DEPENDS_ON:
        os.makedirs(os.path.join(where, 'ansible_collections', namespace), exist_ok=True)
        link = os.path.join(where, 'ansible_collections', namespace, name)
        if not os.path.islink(link):
            os.symlink(os.path.join(REPO, '.ansible', 'collections', 'ansible_collections', namespace, name), link)
    return str(where)


def run(argv, **kwargs):
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ['PATH'], **kwargs.pop('env', {}))
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, **kwargs)


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """The collection built to a tarball and installed into a directory of its own."""
    build_dir = tmp_path_factory.mktemp('build')
    result = run(['ansible-galaxy', 'collection', 'build', '--output-path', str(build_dir), REPO])
    assert result.returncode == 0, result.stderr
    tarball = build_dir / 'eagle3-extraction-0.1.0.tar.gz'
    assert tarball.exists(), result.stdout
    collections = tmp_path_factory.mktemp('collections')
    # offline, as here (no Galaxy): the dependencies galaxy.yml declares are found installed
    depends = dependencies_path(tmp_path_factory.mktemp('depends'))
    result = run(['ansible-galaxy', 'collection', 'install', '--offline', '-p', str(collections), str(tarball)],
                 cwd=str(collections), env={'ANSIBLE_COLLECTIONS_PATH': os.pathsep.join([str(collections), depends])})
    assert result.returncode == 0, result.stderr
    return collections
