"""The venv's interpreter has one owner (plugin_utils/ml_env.py, read by the lookup ml_env_python): the roles
that run with it default to the lookup, and no role writes the path itself."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.eagle3.extraction.plugins.plugin_utils import ml_env

REPO = Path(__file__).resolve().parents[4]


def test_the_default_venv_is_ml_envs_argument_spec_default():
    spec = yaml.safe_load((REPO / 'roles' / 'ml_env' / 'meta' / 'argument_specs.yml').read_text())
    default = spec['argument_specs']['main']['options']['ml_env_path']['default']
    assert ml_env.default_path() == default
    assert ml_env.venv_python() == default + '/bin/python'


def test_a_given_venv_gives_its_interpreter():
    assert ml_env.venv_python('/opt/venv') == '/opt/venv/bin/python'
    assert ml_env.venv_python('/opt/venv/') == '/opt/venv/bin/python'


def test_no_role_writes_the_interpreters_path():
    """Not in its defaults, vars or tasks, nor as an argument spec default (a description may name it)."""
    interpreter = ml_env.venv_python()
    offenders = [str(path.relative_to(REPO)) for pattern in ('defaults/*.yml', 'vars/*.yml', 'tasks/*.yml')
                 for path in (REPO / 'roles').glob('*/' + pattern) if interpreter in path.read_text()]
    for path in (REPO / 'roles').glob('*/meta/argument_specs.yml'):
        for name, option in yaml.safe_load(path.read_text())['argument_specs']['main']['options'].items():
            if interpreter in str(option.get('default', '')):
                offenders.append('%s: %s' % (path.relative_to(REPO), name))
    assert offenders == []


def test_the_roles_that_run_with_it_default_to_the_lookup():
    lookup = "lookup('eagle3.extraction.ml_env_python')"
    for role, name in (('sglang_server', 'sglang_server_python'), ('extraction_job', 'extraction_job_python')):
        assert lookup in yaml.safe_load((REPO / 'roles' / role / 'defaults' / 'main.yml').read_text())[name]
    assert lookup in (REPO / 'roles' / 'sglang_patch' / 'vars' / 'main.yml').read_text()
