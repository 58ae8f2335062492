"""Each role README's variable table is the one lab/tools/role_readme.py makes from the
role's meta/argument_specs.yml: a spec changed without its README fails here, and the tool
run on a copy shows that the check sees such a change and that --write repairs only the table."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / 'lab' / 'tools' / 'role_readme.py'
ROLES = sorted(path.parent.parent.name for path in REPO.glob('roles/*/meta/argument_specs.yml'))
BEGIN = '<!-- BEGIN variables'
END = '<!-- END variables -->'


def tool(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, check=False)


def outside_table(text):
    return text[:text.index(BEGIN)] + text[text.index(END):]


@pytest.fixture
def ml_env(tmp_path):
    """A copy of the ml_env role whose README is up to date."""
    role = tmp_path / 'ml_env'
    shutil.copytree(REPO / 'roles' / 'ml_env', role)
    return role


@pytest.mark.parametrize('role', ROLES)
def test_readme_table_is_made_from_the_argument_spec(role):
    result = tool('--check', REPO / 'roles' / role)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_role_is_checked():
    assert set(ROLES) == {'extraction_job', 'gpu_check', 'ml_env', 'monitoring', 'mooncake_master', 'online_training',
                          'proxmox_container', 'sglang_patch', 'sglang_server'}


def test_a_changed_description_fails_the_check_until_written(ml_env):
    spec = ml_env / 'meta' / 'argument_specs.yml'
    text = spec.read_text()
    assert 'description: Absolute path of the venv,' in text
    spec.write_text(text.replace('description: Absolute path of the venv,', 'description: Where the venv lives,'))
    readme = (ml_env / 'README.md').read_text()

    result = tool('--check', ml_env)
    assert result.returncode == 1
    assert 'README.md: its variable table differs from meta/argument_specs.yml' in result.stdout
    assert '+| `ml_env_path` | str | `/root/ml-env` | Where the venv lives,' in result.stdout
    assert (ml_env / 'README.md').read_text() == readme   # --check writes nothing

    assert tool('--write', ml_env).returncode == 0
    assert tool('--check', ml_env).returncode == 0
    written = (ml_env / 'README.md').read_text()
    assert '| `ml_env_path` | str | `/root/ml-env` | Where the venv lives,' in written
    assert outside_table(written) == outside_table(readme)


def test_a_new_option_gets_its_row_with_type_choices_and_default(ml_env):
    spec = ml_env / 'meta' / 'argument_specs.yml'
    spec.write_text(spec.read_text() + (
        '      ml_env_mode:\n'
        '        description: Pick V(fast) or C(slow | safe); see O(ml_env_path).\n'
        '        type: str\n'
        '        choices: [fast, slow]\n'
        '        default: "{{ ml_mode | default(\'fast\') }}"\n'))
    assert tool('--check', ml_env).returncode == 1
    assert tool('--write', ml_env).returncode == 0
    rows = (ml_env / 'README.md').read_text().splitlines()
    # a pipe in a cell is escaped, or GitHub would end the cell there
    assert rows[rows.index(END) - 2] == (
        "| `ml_env_mode` | str: `fast`, `slow` | `{{ ml_mode \\| default('fast') }}` "
        "| Pick `fast` or `slow \\| safe`; see `ml_env_path`. |")


def test_other_entry_points_are_listed_with_their_variables():
    readme = (REPO / 'roles' / 'extraction_job' / 'README.md').read_text()
    assert ('- `tasks_from: stop`: Stop every shard unit and capture gateway of the job on this host; of the '
            'variables above: `extraction_job_unit`, `extraction_job_gateway_unit`.') in readme


def test_an_entry_point_with_other_options_gets_its_own_table(ml_env):
    spec = ml_env / 'meta' / 'argument_specs.yml'
    spec.write_text(spec.read_text() + (
        '  imports:\n'
        '    short_description: Only the import check.\n'
        '    options:\n'
        '      ml_env_import_checks:\n'
        '        description: Modules to find.\n'
        '        type: list\n'
        '        elements: str\n'
        '        default: []\n'))
    assert tool('--write', ml_env).returncode == 0
    text = (ml_env / 'README.md').read_text()
    assert text[text.index('- `tasks_from: imports`'):text.index(END)] == (
        '- `tasks_from: imports`: Only the import check:\n\n'
        '| variable | type | default | description |\n'
        '| --- | --- | --- | --- |\n'
        '| `ml_env_import_checks` | list of str | `[]` | Modules to find. |\n\n')


def test_a_readme_without_the_markers_fails(ml_env):
    readme = ml_env / 'README.md'
    readme.write_text(readme.read_text().replace(END, ''))
    result = tool('--check', ml_env)
    assert result.returncode == 1
    assert 'README.md: no variable table between the markers' in result.stdout
    assert tool('--write', ml_env).returncode == 1
