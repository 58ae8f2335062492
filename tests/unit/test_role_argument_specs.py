"""Every role's public variables are exactly its argument spec's options, with the same
defaults (as prometheus-community/ansible checks in CI): Ansible then validates every
input before the first task, and the README's table cannot drift from what runs."""

import glob
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
ROLES = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(REPO, 'roles', '*', 'tasks')))


def load(role, path):
    with open(os.path.join(REPO, 'roles', role, path)) as f:
        return yaml.safe_load(f) or {}


@pytest.mark.parametrize('role', ROLES)
def test_defaults_equal_argument_specs(role):
    defaults = load(role, 'defaults/main.yml')
    options = load(role, 'meta/argument_specs.yml')['argument_specs']['main']['options']
    assert set(defaults) == set(options)
    assert {k: options[k].get('default') for k in defaults} == defaults
    assert all(name.startswith(role + '_') for name in defaults)
    assert all(options[k].get('description') for k in options)


def test_every_role_has_its_spec_and_readme():
    assert ROLES
    for role in ROLES:
        for path in ('meta/argument_specs.yml', 'defaults/main.yml', 'README.md'):
            assert os.path.isfile(os.path.join(REPO, 'roles', role, path)), (role, path)
