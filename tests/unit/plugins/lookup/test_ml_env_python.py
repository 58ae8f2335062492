"""The lookup ml_env_python: ml_env's published fact, else the host's ml_env_path's interpreter, else ml_env's
default venv's; with path, that venv's."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.errors import AnsibleLookupError
from ansible.template import Templar

from ansible_collections.eagle3.extraction.plugins.lookup.ml_env_python import LookupModule


@pytest.fixture
def lookup():
    loader = DataLoader()

    def run(variables, **kwargs):
        plugin = LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables))
        return plugin.run(kwargs.pop('terms', []), variables=variables, **kwargs)
    return run


def test_the_default_venv(lookup):
    assert lookup({}) == ['/root/ml-env/bin/python']


def test_the_hosts_venv(lookup):
    assert lookup({'ml_env_path': '/opt/eagle3/venv'}) == ['/opt/eagle3/venv/bin/python']


def test_the_fact_ml_env_published_wins(lookup):
    assert lookup({'ml_env_path': '/opt/eagle3/venv', 'ml_env_python_bin': '/srv/venv/bin/python'}) == [
        '/srv/venv/bin/python']


def test_a_given_path_wins_over_the_hosts_variables(lookup):
    assert lookup({'ml_env_python_bin': '/srv/venv/bin/python'}, path='/opt/v') == ['/opt/v/bin/python']


def test_a_term_or_another_option_is_refused(lookup):
    with pytest.raises(AnsibleLookupError, match='no terms'):
        lookup({}, terms=['/opt/v'])
    with pytest.raises(AnsibleLookupError, match='venv'):
        lookup({}, venv='/opt/v')
