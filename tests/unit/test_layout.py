"""The layout tests/README.md describes: tests/ holds the suites pytest.ini names (and
ansible-test's tests/sanity), and each unit test file under tests/unit/plugins/ is named after
the plugin it tests, so that a plugin's tests are found from its path."""

from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# ansible-test's ignore files (tests/sanity) are no pytest suite; Python's caches and
# ansible-test's output (.gitignore) are no part of the layout
NOT_SUITES = {'sanity', '__pycache__', 'output'}
# pytest's default import mode needs unique file names: these types' tests may say their type
SUFFIXES = {'action': '_action', 'lookup': '_lookup'}


def pytest_testpaths():
    config = configparser.ConfigParser()
    config.read(REPO / 'pytest.ini')
    return config['pytest']['testpaths'].split()


def unnamed_plugins(unit_plugins, plugins):
    """The test files under unit_plugins whose name is no plugin of their type under plugins: an
    action or lookup plugin's file may end in _action or _lookup (a module or plugin_utils file of the
    same name has test_<name>.py)."""
    wrong = []
    for test in sorted(unit_plugins.glob('*/test_*.py')):
        name = test.stem[len('test_'):]
        suffix = SUFFIXES.get(test.parent.name, '')
        if suffix and name.endswith(suffix):
            name = name[:-len(suffix)]
        if not (plugins / test.parent.name / (name + '.py')).is_file():
            wrong.append(str(test.relative_to(unit_plugins)))
    return wrong


def test_every_folder_of_tests_is_a_suite_pytest_finds():
    folders = sorted('tests/' + p.name for p in (REPO / 'tests').iterdir() if p.is_dir() and p.name not in NOT_SUITES)
    assert folders == sorted(pytest_testpaths())


def test_each_unit_test_file_of_a_plugin_is_named_after_it():
    assert unnamed_plugins(REPO / 'tests' / 'unit' / 'plugins', REPO / 'plugins') == []


def test_a_file_named_after_no_plugin_is_found(tmp_path):
    # the check above can fail: a file named after a property, not a plugin, is reported
    plugins, unit = tmp_path / 'plugins', tmp_path / 'unit'
    for path in (plugins / 'modules' / 'port_reclaim.py', plugins / 'action' / 'copy_tree.py',
                 unit / 'modules' / 'test_port_reclaim.py', unit / 'modules' / 'test_bad_values.py',
                 unit / 'action' / 'test_copy_tree_action.py', plugins / 'lookup' / 'host_plan.py',
                 unit / 'lookup' / 'test_host_plan_lookup.py', unit / 'lookup' / 'test_host_plan_filter.py'):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    assert unnamed_plugins(unit, plugins) == ['lookup/test_host_plan_filter.py', 'modules/test_bad_values.py']
