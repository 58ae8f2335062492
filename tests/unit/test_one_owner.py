"""Each derived thing has one owner, read from the roles' and playbooks' YAML and templates:
"converged" is decided by the module converged_state, called from one task file, and no task
checksums files itself; no template or task computes a table with Jinja (the filter
rollout_table and module_utils/text_table do); `systemctl reset-failed` is the module unit_reset_failed's
alone; a role's default is its record's (plugin_utils/role_variables/), never written again in a plugin's code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
YAML = sorted(p for pattern in ('roles/**/*.yml', 'playbooks/**/*.yml', 'extract.yml') for p in REPO.glob(pattern))
TEMPLATES = sorted(p for pattern in ('roles/**/*.j2', 'playbooks/**/*.j2') for p in REPO.glob(pattern))
# a Jinja statement that builds a list up (rows of a table, lines of a message) is a program
BUILDS_A_LIST = re.compile(r'\{%-?\s*(set\s+\w+\s*=\s*\[|set\s+\w+\s*=\s*\w+\.append\(|do\s)')


def tasks(node):
    """Every task mapping under a play, a task list or a block."""
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        if any(key in node for key in ('block', 'rescue', 'always', 'tasks', 'pre_tasks', 'post_tasks')):
            for key in ('block', 'rescue', 'always', 'tasks', 'pre_tasks', 'post_tasks'):
                yield from tasks(node.get(key) or [])
        else:
            yield node


def calls(module):
    found = []
    for path in YAML:
        for task in tasks(yaml.safe_load(path.read_text()) or []):
            if module in task:
                found.append(str(path.relative_to(REPO)))
    return found


def test_converged_is_decided_by_one_module_from_one_task_file():
    assert sorted(set(calls('eagle3.extraction.converged_state'))) == ['playbooks/tasks/converged.yml']


def test_no_task_checksums_files_with_a_command():
    offenders = []
    for path in YAML:
        for task in tasks(yaml.safe_load(path.read_text()) or []):
            for key in ('ansible.builtin.command', 'ansible.builtin.shell'):
                if 'sha256sum' in str(task.get(key, '')):
                    offenders.append('%s: %s' % (path.relative_to(REPO), task.get('name')))
    assert offenders == []


def test_no_template_or_task_builds_a_table_in_jinja():
    offenders = [str(path.relative_to(REPO)) for path in YAML + TEMPLATES if BUILDS_A_LIST.search(path.read_text())]
    assert offenders == []


def test_reset_failed_is_run_and_decided_by_one_module():
    # systemctl reset-failed, and whether a unit needs it, is the module unit_reset_failed's: no task runs it
    # with a command, no plugin builds its argv, no task decides it from a unit's state
    tasks_running_it = []
    for path in YAML:
        for task in tasks(yaml.safe_load(path.read_text()) or []):
            text = str(task.get('ansible.builtin.command', '')) + str(task.get('ansible.builtin.shell', ''))
            if 'reset-failed' in text or 'reset_failed' in str(task.get('eagle3.extraction.server_wait', '')):
                tasks_running_it.append('%s: %s' % (path.relative_to(REPO), task.get('name')))
    assert tasks_running_it == []
    owner = REPO / 'plugins' / 'modules' / 'unit_reset_failed.py'
    plugins = [str(p.relative_to(REPO)) for p in sorted(REPO.glob('plugins/**/*.py'))
               if p != owner and "'reset-failed'" in p.read_text()]
    assert plugins == []
    assert sorted(set(calls('eagle3.extraction.unit_reset_failed'))) == [
        'roles/sglang_server/tasks/restart.yml', 'roles/sglang_server/tasks/restart_server.yml',
        'roles/sglang_server/tasks/stop.yml']


# a default a plugin holds for a reason of its own, not as a copy of the role's
DEFAULT_ALIKE = {
    ('plugins/modules/owned_paths.py', '/etc/systemd/system'): "systemd's own unit dirs, where a unit may lie",
    ('plugins/modules/shm_reclaim.py', 'nccl-*'): "the module's own documented default, which the role passes anyway",
    # anywhere: what a bind host is compared with, what a wildcard bind is called on
    (None, '127.0.0.1'): "IPv4's loopback address, a fact of IP that sglang_server_host's default happens to be",
}


def role_string_defaults():
    """{value: [variable]} of the roles' plain string defaults that could only be copied: paths, unit and
    module names (a template, a word or a short value is no tell)."""
    found = {}
    for spec in sorted(REPO.glob('roles/*/meta/argument_specs.yml')):
        for name, option in yaml.safe_load(spec.read_text())['argument_specs']['main']['options'].items():
            values = option.get('default') if isinstance(option.get('default'), list) else [option.get('default')]
            for value in values:
                if isinstance(value, str) and len(value) >= 6 and '{{' not in value and re.search(r'[/.*-]', value):
                    found.setdefault(value, []).append(name)
    return found


def code_strings(path):
    """(line, text) of each string constant of a plugin that is code: not a docstring, not its DOCUMENTATION,
    EXAMPLES or RETURN."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', '') in ('DOCUMENTATION', 'EXAMPLES', 'RETURN')
                                                for t in node.targets):
            docs.add(id(node.value))
        body = getattr(node, 'body', None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            docs.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


# where a role's variables, their defaults among them, are declared: the one place a default is written
RECORDS = REPO / 'plugins' / 'plugin_utils' / 'role_variables'


def test_no_plugin_writes_a_roles_default_again():
    # a role's default is its record's (the argument spec is made from it; plugin_utils/spec_defaults reads it):
    # a copy in code goes stale
    defaults = role_string_defaults()
    copies = []
    for path in sorted(REPO.glob('plugins/**/*.py')):
        where = str(path.relative_to(REPO))
        if RECORDS in path.parents:
            continue
        for line, text in code_strings(path):
            if text in defaults and (where, text) not in DEFAULT_ALIKE and (None, text) not in DEFAULT_ALIKE:
                copies.append('%s:%d: %r (the default of %s)' % (where, line, text, ', '.join(defaults[text])))
    assert copies == []
    assert 'sglang-extraction' in defaults and '/srv/eagle3-extraction' in defaults   # the check sees the specs
