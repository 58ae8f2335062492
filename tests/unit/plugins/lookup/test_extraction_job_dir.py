"""The lookup extraction_job_dir: <output_root>/<name>, each the host's variable or the role's
argument spec default; what status.yml, verify.yml, repair.yml and the role read."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.eagle3.extraction.plugins.lookup.extraction_job_dir import LookupModule
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import COLLECTION


@pytest.fixture
def lookup():
    loader = DataLoader()

    def run(variables, terms=(), **kwargs):
        plugin = LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables))
        return plugin.run(list(terms), variables=variables, **kwargs)
    return run


def test_the_roles_defaults_when_nothing_is_set(lookup):
    with open(f'{COLLECTION}/roles/extraction_job/defaults/main.yml', encoding='utf-8') as f:
        defaults = yaml.safe_load(f)
    assert lookup({}) == ['%s/%s' % (defaults['extraction_job_output_root'], defaults['extraction_job_name'])]


def test_the_hosts_variables(lookup):
    assert lookup({'extraction_job_output_root': '/data/out/', 'extraction_job_name': 'kimi'}) == ['/data/out/kimi']


def test_one_variable_set_the_other_from_the_spec(lookup):
    assert lookup({'extraction_job_name': 'kimi'}) == ['/srv/eagle3-extraction/kimi']


def test_templated_values_are_rendered(lookup):
    # as inventory and role variables are: trusted templates
    assert lookup({'extraction_job_name': trust_as_template('{{ base }}_v2'), 'base': 'kimi'}) == ['/srv/eagle3-extraction/kimi_v2']


def test_terms_and_options_are_refused(lookup):
    with pytest.raises(AnsibleLookupError, match='no terms and no options'):
        lookup({}, terms=['x'])
    with pytest.raises(AnsibleLookupError, match='no terms and no options'):
        lookup({}, path='/x')
