"""spec_defaults: a role's defaults as its argument spec states them (equal to defaults/main.yml)."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.eagle3.extraction.plugins.plugin_utils.role_inputs import load_specs
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import COLLECTION, role_options, spec_defaults


@pytest.mark.parametrize('role, names', [
    ('extraction_job', ('extraction_job_output_root', 'extraction_job_name')),
    ('sglang_server', ('sglang_server_host', 'sglang_server_port')),
    ('ml_env', ('ml_env_path',)),
])
def test_the_specs_defaults_are_the_roles(role, names):
    with open(f'{COLLECTION}/roles/{role}/defaults/main.yml', encoding='utf-8') as f:
        defaults = yaml.safe_load(f)
    assert spec_defaults(role, names) == dict((name, defaults[name]) for name in names)


def test_an_unknown_option_is_a_key_error():
    with pytest.raises(KeyError):
        spec_defaults('ml_env', ('ml_env_no_such_option',))


def test_the_specs_are_read_once_and_each_caller_of_load_specs_gets_its_own_copy():
    assert role_options('sglang_server') is role_options('sglang_server')
    specs = load_specs()
    specs['sglang_server']['sglang_server_port']['default'] = 1
    assert spec_defaults('sglang_server', ('sglang_server_port',)) == {'sglang_server_port': 8000}
    assert load_specs()['sglang_server']['sglang_server_port']['default'] == 8000
