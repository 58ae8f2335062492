"""The collection builds, installs, documents its modules, and its main playbook runs
by FQCN from the installed copy against the local fleet."""

import os
import re
import subprocess

import ansible_runner
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
VENV_BIN = os.path.join(REPO, '.venv', 'bin')
DEMO_INVENTORY = os.path.join(REPO, 'inventory', 'demo')


def run(argv, **kwargs):
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ['PATH'], **kwargs.pop('env', {}))
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, **kwargs)


@pytest.fixture(scope='module')
def fleet():
    """The local fleet, up (tests/fleet/up.sh is idempotent: seconds when it runs)."""
    result = run(['bash', os.path.join(REPO, 'tests', 'fleet', 'up.sh')])
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """The collection as a user gets it: built to a tarball and installed elsewhere."""
    build_dir = tmp_path_factory.mktemp('build')
    result = run(['ansible-galaxy', 'collection', 'build', '--output-path', str(build_dir), REPO])
    assert result.returncode == 0, result.stderr
    tarball = build_dir / 'eagle3-extraction-0.1.0.tar.gz'
    assert tarball.exists(), result.stdout
    collections = tmp_path_factory.mktemp('collections')
    result = run(['ansible-galaxy', 'collection', 'install', '--force', '-p', str(collections), str(tarball)],
                 cwd=str(collections))
    assert result.returncode == 0, result.stderr
    return collections


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


def fleet_table(runner):
    """The lines of the table the last play prints."""
    for event in runner.events:
        res = event.get('event_data', {}).get('res', {})
        if event.get('event') == 'runner_on_ok' and isinstance(res.get('msg'), list) and res['msg'] \
                and res['msg'][0].startswith('HOST'):
            return [line.split() for line in res['msg']]
    raise AssertionError('no fleet table in the run')


@pytest.mark.parametrize('playbook', ['extract.yml', 'eagle3.extraction.extract'])
def test_extract_reaches_the_whole_fleet(fleet, installed, tmp_path, playbook):
    """From the checkout (root extract.yml) and from the installed collection (FQCN)."""
    envvars = {'ANSIBLE_HOST_KEY_CHECKING': 'false', 'ANSIBLE_INJECT_FACT_VARS': 'false'}
    if playbook == 'extract.yml':
        cwd, envvars['ANSIBLE_CONFIG'] = REPO, os.path.join(REPO, 'ansible.cfg')
    else:
        cwd, envvars['ANSIBLE_COLLECTIONS_PATH'] = str(installed), str(installed)
    runner = ansible_runner.run(
        private_data_dir=str(tmp_path), project_dir=cwd, playbook=playbook, inventory=DEMO_INVENTORY,
        envvars=envvars, quiet=True, cmdline='--forks 10')
    assert runner.status == 'successful', runner.stdout.read()
    assert runner.stats['failures'] == {} and runner.stats['dark'] == {}
    assert sorted(runner.stats['ok']) == ['ct1', 'ct2', 'ct3', 'localhost', 'pve1', 'pve2']
    rows = {row[0]: row for row in fleet_table(runner)[1:]}
    assert [h for h, row in rows.items() if row[1] == 'hypervisor'] == ['pve1', 'pve2']
    assert rows['pve1'][2] == '2' and rows['pve2'][2] == '1'
    for ct, placement in (('ct1', '101@pve1'), ('ct2', '102@pve1'), ('ct3', '103@pve2')):
        assert rows[ct][1:3] == ['container', placement]
        assert ' '.join(rows[ct][4:]) == 'pct running, systemd running'
