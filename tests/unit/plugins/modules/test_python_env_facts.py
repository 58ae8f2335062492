"""python_env_facts answers with the interpreter that runs it, and imports nothing it is
asked to find: a package whose __init__ raises is still located, with its directory."""

from __future__ import annotations

import json
import os
import sys

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.eagle3.extraction.plugins.modules import python_env_facts


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            python_env_facts.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on sys.path with a package that must not be imported and an editable install record."""
    pkg = tmp_path / 'explodes'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('raise RuntimeError("imported")\n')
    (pkg / 'sub.py').write_text('')
    (tmp_path / 'plain.py').write_text('')
    checkout = tmp_path / 'checkout'
    checkout.mkdir()
    info = tmp_path / 'demo_dist-1.2.3.dist-info'
    info.mkdir()
    (info / 'METADATA').write_text('Metadata-Version: 2.1\nName: demo-dist\nVersion: 1.2.3\n')
    (info / 'direct_url.json').write_text(json.dumps(
        {'url': 'file://' + str(checkout), 'dir_info': {'editable': True}}))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_finds_without_importing_and_reads_versions(site, capsys):
    result = run({'modules': ['explodes', 'plain', 'no_such_module', 'json'],
                  'distributions': ['demo-dist', 'no-such-dist']}, capsys)
    assert not result['changed']
    assert result['modules']['explodes'] == {'error': None, 'path': os.path.realpath(site / 'explodes')}
    assert 'explodes' not in sys.modules
    assert result['modules']['plain']['path'] == os.path.realpath(site / 'plain.py')
    assert result['modules']['no_such_module'] == {'error': "No module named 'no_such_module'", 'path': None}
    assert result['modules']['json']['error'] is None
    assert result['distributions'] == {'demo-dist': '1.2.3', 'no-such-dist': None}
    assert result['python']['executable'] == sys.executable


def test_a_submodule_whose_parent_fails_names_the_reason(site, capsys):
    result = run({'modules': ['explodes.sub', 'no_such_module.sub']}, capsys)
    assert result['modules']['explodes.sub']['error'] == 'RuntimeError: imported'
    assert result['modules']['no_such_module.sub']['error'].startswith('ModuleNotFoundError')


def test_the_missing_modules_in_the_order_given_for_a_message(site, capsys):
    result = run({'modules': ['no_such_module.sub', 'json', 'no_such_module']}, capsys)
    assert result['modules_missing'] == [
        "no_such_module.sub (ModuleNotFoundError: No module named 'no_such_module')",
        "no_such_module (No module named 'no_such_module')"]
    assert run({'modules': ['json']}, capsys)['modules_missing'] == []


def test_require_fails_naming_the_interpreter_each_missing_module_and_the_advice(site, capsys):
    result = run({'modules': ['json', 'no_such_module'], 'require': True, 'role': 'ml_env',
                  'advice': 'Add what provides it.'}, capsys)
    assert result['failed'] and result['msg'] == (
        "ml_env: %s cannot find no_such_module (No module named 'no_such_module'). Add what provides it."
        % sys.executable)
    assert result['modules']['json']['error'] is None
    assert not run({'modules': ['json'], 'require': True}, capsys).get('failed')
    absent = run({'modules': ['json'], 'distributions': ['no-such-dist'], 'require': True}, capsys)
    assert absent['failed'] and absent['msg'] == '%s cannot find no distribution named no-such-dist is installed.' % (
        sys.executable)


def test_lists_checkouts_not_installed_editable(site, capsys):
    other = site / 'other'
    other.mkdir()
    result = run({'editable_paths': [str(site / 'checkout'), str(other)]}, capsys)
    assert result['editable_paths_missing'] == [str(other)]


@pytest.mark.parametrize('args, says', [
    ({'modules': ['sglang; import os']}, 'modules'),
    ({'modules': ['sglang\n']}, 'modules'),
    ({'modules': ['']}, 'modules'),
    ({'distributions': ['sglang==0.5']}, 'distributions'),
    ({'distributions': ['-sglang']}, 'distributions'),
    ({'editable_paths': ['relative/checkout']}, 'editable_paths'),
    ({'editable_paths': ['/srv/a\nb']}, 'editable_paths'),
    ({'requirements': ['torch==2.13.0\n']}, 'requirements'),
    ({'requirements': ['  ']}, 'requirements'),
])
def test_bad_names_are_refused(args, says, capsys):
    result = run(args, capsys)
    assert result['failed'] and result['msg'].startswith(says)


def test_a_version_not_listed_fails_naming_it_and_the_listed_ones(run_module):
    import pip
    args = {'distributions': ['pip'], 'versions': {'pip': ['0.0.1', '0.0.2']}, 'require': True, 'role': 'sglang_patch',
            'advice': 'Install a supported one.'}
    result = run_module(python_env_facts, args)
    assert result['failed'] and result['distributions']['pip'] == pip.__version__
    assert result['msg'].startswith('sglang_patch: pip %s (' % pip.__version__)
    assert 'is not supported; supported versions: pip 0.0.1, 0.0.2. Install a supported one.' in result['msg']
    assert not run_module(python_env_facts, dict(args, versions={'pip': [pip.__version__]})).get('failed')
    assert not run_module(python_env_facts, dict(args, require=False)).get('failed')


def test_the_requirements_the_venv_does_not_meet_in_the_order_given(site, capsys):
    """What ml_env runs pip for: a missing distribution, another version, extras and URLs (pip decides); not one
    installed at an admitted version, nor one whose marker leaves this interpreter out."""
    given = ['demo-dist==1.2.3', 'demo_dist>=1.0,<2', 'Demo.Dist', 'demo-dist==1.2.4', 'no-such-dist==1.0',
             'demo-dist[extra]==1.2.3', 'demo-dist @ file:///srv/demo_dist-1.2.3.whl', '/root/wheelhouse/x.whl',
             'no-such-dist==1.0; python_version < "3"']
    result = run({'requirements': given}, capsys)
    assert result['requirements_unmet'] == ['demo-dist==1.2.4', 'no-such-dist==1.0', 'demo-dist[extra]==1.2.3',
                                            'demo-dist @ file:///srv/demo_dist-1.2.3.whl', '/root/wheelhouse/x.whl']
    assert not result['changed']


def test_without_packaging_every_requirement_is_unmet(site, capsys, monkeypatch):
    """A venv without packaging (a new one, before ml_env installs it): pip decides for every package."""
    monkeypatch.setitem(sys.modules, 'packaging.requirements', None)
    result = run({'requirements': ['demo-dist==1.2.3']}, capsys)
    assert result['requirements_unmet'] == ['demo-dist==1.2.3']


def test_the_requirements_of_a_file_the_venv_does_not_meet(site, capsys, tmp_path):
    """ml_env's requirements file: comments and blank lines left out; a file pip alone reads (an option line, a
    continuation, none at all) is unmet as a whole."""
    plain = tmp_path / 'plain.txt'
    plain.write_text('# the pinned set\n\ndemo-dist==1.2.3  # met\nno-such-dist==1.0\n')
    result = run({'requirements_file': str(plain)}, capsys)
    assert result['requirements_file_unmet'] == ['no-such-dist==1.0']
    plain.write_text('demo-dist==1.2.3\n')
    assert run({'requirements_file': str(plain)}, capsys)['requirements_file_unmet'] == []
    for text in ('-r other.txt\ndemo-dist==1.2.3\n', 'demo-dist==1.2.3 \\\n  --hash=sha256:00\n'):
        plain.write_text(text)
        assert run({'requirements_file': str(plain)}, capsys)['requirements_file_unmet'] == [
            line.split(' #')[0].strip() for line in text.splitlines() if line.strip()]
    assert run({'requirements_file': str(tmp_path / 'none.txt')}, capsys)['requirements_file_unmet'] == [
        str(tmp_path / 'none.txt')]
    assert 'requirements_file_unmet' not in run({}, capsys)
