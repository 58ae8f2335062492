"""Each role variable is declared once, in its role's records (plugins/plugin_utils/role_variables/<role>.py):
the role's meta/argument_specs.yml, defaults/main.yml and README table are made from them
(lab/tools/role_files.py), and what the plan, the checks and a multi-node server's nodes read of it comes from
its record. A copy of the collection walks a newcomer's path: one record added, the check names every file to
make again, --write makes them, and the new flag reaches the plan with the inventory's value, out of range
refused by the inventory check's and the roles' rules."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NEW_RECORD = '''    Variable(
        'sglang_server_max_running_requests', 'int', 256,
        description='C(--max-running-requests): the most requests the server runs at once.',
        rule=number(1, 1048576), flag='max-running-requests', same_on_every_node=True),
'''
# the plan made from the inventory (the inventory check's way) and as a role's task sees its variables (the lookup's)
PLAN = '''
import json, sys
from ansible_collections.eagle3.extraction.plugins.plugin_utils import host_plan, role_inputs, variables
inventory = {'ct1': {'sglang_server_max_running_requests': 512, 'sglang_server_model_path': '/m', 'sglang_server_tp_size': 8}}
task_vars = dict(variables.defaults('sglang_server'), inventory_hostname='ct1', hostvars={}, groups={},
                 **inventory['ct1'])
print(json.dumps({
    'inventory': host_plan.plan(inventory, 'ct1')['server']['flags'],
    'role': host_plan.task_plan(task_vars, lambda value: value)['server']['flags'],
    'default': host_plan.plan({'ct1': {}}, 'ct1')['server']['flags'],
    'refused': role_inputs.host_value_errors(role_inputs.load_specs(), {'sglang_server_max_running_requests': 0}),
    'in_flags': role_inputs.host_value_errors(role_inputs.load_specs(),
                                              {'sglang_server_flags': {'max-running-requests': 9}}),
    'same': 'sglang_server_max_running_requests' in variables.SAME_ON_EVERY_NODE,
}))
'''


def tool(collection, *args):
    return subprocess.run([sys.executable, str(collection / 'lab' / 'tools' / 'role_files.py'), *args],
                          capture_output=True, text=True, check=False, cwd=str(collection))


def test_every_roles_files_are_made_from_its_records():
    result = tool(REPO, '--check')
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope='module')
def collection(tmp_path_factory):
    """A copy of the collection's plugins, roles and tools, importable as ansible_collections.eagle3.extraction."""
    root = tmp_path_factory.mktemp('collections')
    copy = root / 'ansible_collections' / 'eagle3' / 'extraction'
    for part in ('plugins', 'roles', 'lab/tools'):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns('__pycache__'))
    return copy


def test_a_new_variable_is_one_record(collection):
    records = collection / 'plugins' / 'plugin_utils' / 'role_variables' / 'sglang_server.py'
    text = records.read_text()
    after = text.index('    Variable(\n        \'sglang_server_flags\'')
    records.write_text(text[:after] + NEW_RECORD + text[after:])

    check = tool(collection, '--check', 'sglang_server')
    assert check.returncode == 1
    for path in ('roles/sglang_server/meta/argument_specs.yml', 'roles/sglang_server/defaults/main.yml',
                 'roles/sglang_server/README.md'):
        assert path in check.stdout, check.stdout
    assert tool(collection, '--write', 'sglang_server').returncode == 0
    assert tool(collection, '--check').returncode == 0

    role = collection / 'roles' / 'sglang_server'
    spec = yaml.safe_load((role / 'meta' / 'argument_specs.yml').read_text())['argument_specs']
    assert spec['main']['options']['sglang_server_max_running_requests'] == {
        'description': 'C(--max-running-requests): the most requests the server runs at once.', 'type': 'int',
        'default': 256}
    assert spec['deploy']['options'] is not None and 'sglang_server_max_running_requests' in spec['deploy']['options']
    assert yaml.safe_load((role / 'defaults' / 'main.yml').read_text())['sglang_server_max_running_requests'] == 256
    assert '| `sglang_server_max_running_requests` | int | `256` |' in (role / 'README.md').read_text()

    run = subprocess.run([sys.executable, '-c', PLAN], capture_output=True, text=True, check=False,
                         env={'PYTHONPATH': str(collection.parents[2])})
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found['inventory']['max-running-requests'] == found['role']['max-running-requests'] == 512
    assert found['inventory'] == found['role']
    assert found['default']['max-running-requests'] == 256
    assert found['refused'] == ['sglang_server_max_running_requests=0 is out of range; give a number from 1 to 1048576']
    assert found['same']
    # one way in: the flags refuse it, naming its variable
    assert found['in_flags'] == ["sglang_server_flags['max-running-requests'] is set; --max-running-requests is "
                                 "sglang_server_max_running_requests's: set that instead"]


def test_a_record_changed_without_its_files_fails_the_check(collection):
    records = collection / 'plugins' / 'plugin_utils' / 'role_variables' / 'ml_env.py'
    records.write_text(records.read_text().replace("'ml_env_path', 'str', '/root/ml-env'",
                                                   "'ml_env_path', 'str', '/opt/ml-env'"))
    check = tool(collection, '--check', 'ml_env')
    assert check.returncode == 1
    assert '-ml_env_path: /root/ml-env\n+ml_env_path: /opt/ml-env' in check.stdout
