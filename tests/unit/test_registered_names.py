"""No task of a role registers a result under a name its vars/main.yml or defaults/main.yml defines.

A registered result outranks the role's vars: every later task reading that name gets the task's
result instead of the dict or value the vars file gives it. extraction_job's configure step
registered the unit template's result as __extraction_job_unit_file, the dict vars/main.yml gives
owned_paths, and `extraction_job_state: stopped` failed every time at stop.yml's owned_paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (REPO / 'roles').iterdir() if (path / 'tasks').is_dir())


def _registered(node, found):
    """Every name a task under node registers (blocks, rescue and always included)."""
    if isinstance(node, list):
        for item in node:
            _registered(item, found)
    elif isinstance(node, dict):
        if isinstance(node.get('register'), str):
            found.add(node['register'])
        for key in ('block', 'rescue', 'always'):
            _registered(node.get(key), found)
    return found


def _defined(role):
    names = set()
    for part in ('vars', 'defaults'):
        path = REPO / 'roles' / role / part / 'main.yml'
        if path.exists():
            names.update(yaml.safe_load(path.read_text()) or {})
    return names


@pytest.mark.parametrize('role', ROLES)
def test_no_task_registers_a_name_the_role_defines(role):
    clashes = []
    for path in sorted((REPO / 'roles' / role / 'tasks').glob('*.yml')):
        for name in sorted(_registered(yaml.safe_load(path.read_text()), set()) & _defined(role)):
            clashes.append('%s registers %s' % (path.relative_to(REPO), name))
    assert not clashes, 'a registered result hides the vars of the same name: ' + '; '.join(clashes)


def test_the_check_finds_a_registered_name_inside_a_block():
    tasks = [{'name': 'a', 'block': [{'name': 'b', 'register': 'x'}], 'rescue': [{'register': 'y'}]}]
    assert _registered(tasks, set()) == {'x', 'y'}
