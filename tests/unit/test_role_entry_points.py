"""The roles' entry points, read from their task files: a preflight that only reads, runs
under every tag of its role, and no program hidden in a `python -c` string."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (REPO / 'roles').iterdir() if (p / 'tasks').is_dir())

# what a preflight may run: checks, reads, and modules that change nothing (or run in check mode)
READ_ONLY = {
    'ansible.builtin.assert', 'ansible.builtin.debug', 'ansible.builtin.fail', 'ansible.builtin.set_fact',
    'ansible.builtin.stat', 'ansible.builtin.find', 'ansible.builtin.slurp', 'ansible.builtin.include_vars',
    'ansible.builtin.import_tasks', 'ansible.builtin.command',
    'eagle3.extraction.python_env_facts', 'eagle3.extraction.server_host_facts', 'eagle3.extraction.gpu_facts',
    'eagle3.extraction.role_input_check', 'eagle3.extraction.owned_paths', 'eagle3.extraction.gpu_device_nodes',
}
CHECK_MODE_ONLY = {'eagle3.extraction.sglang_source_patch', 'eagle3.extraction.pct_container'}
KEYWORDS = {'name', 'vars', 'register', 'when', 'loop', 'loop_control', 'tags', 'check_mode', 'changed_when',
            'failed_when', 'delegate_to', 'delegate_facts', 'no_log', 'diff', 'block', 'rescue', 'always',
            'environment', 'run_once', 'until', 'retries', 'delay', 'ignore_errors', 'module_defaults',
            'timeout'}


def tasks_of(path):
    """Every task of a task file, blocks and rescues opened."""
    found = []

    def walk(items):
        for task in items or []:
            found.append(task)
            for key in ('block', 'rescue', 'always'):
                walk(task.get(key))
    walk(yaml.safe_load(path.read_text()))
    return found


def action(task):
    names = [key for key in task if key not in KEYWORDS]
    return names[0] if names else None


@pytest.mark.parametrize('role', ROLES)
def test_preflight_only_reads(role):
    tasks = tasks_of(REPO / 'roles' / role / 'tasks' / 'preflight.yml')
    for task in tasks:
        name = action(task)
        if name is None:
            continue
        if name == 'ansible.builtin.include_tasks':
            # what it includes is read the same way
            tasks.extend(tasks_of(REPO / 'roles' / role / 'tasks' / task[name]['file']))
            continue
        if name in CHECK_MODE_ONLY:
            assert task.get('check_mode') is True, (role, task['name'])
        elif name == 'ansible.builtin.command':
            # a read: never reports a change, and runs in check mode to read
            assert task.get('changed_when') is False and task.get('check_mode') is False, (role, task['name'])
        else:
            assert name in READ_ONLY, '%s preflight runs %s (%s)' % (role, name, task['name'])


@pytest.mark.parametrize('role', ROLES)
def test_preflight_runs_under_every_tag_of_its_role(role):
    main = yaml.safe_load((REPO / 'roles' / role / 'tasks' / 'main.yml').read_text())
    text = (REPO / 'roles' / role / 'tasks' / 'main.yml').read_text()
    for sub in re.findall(r'import_tasks: (\w+\.yml)', text):
        text += (REPO / 'roles' / role / 'tasks' / sub).read_text()
    role_tags = set(re.findall(r'\b%s_[a-z]+\b' % role, text)) - {role + '_python', role + '_state'}
    role_tags = {tag for tag in role_tags if re.search(r'tags: \[[^\]]*\b%s\b' % tag, text, re.S)}

    def preflight_tags(items):
        for task in items:
            if str(task.get('ansible.builtin.import_tasks', '')) == 'preflight.yml':
                return set(task.get('tags', []))
            found = preflight_tags(task.get('block', []))
            if found is not None:
                return found
        return None
    tags = preflight_tags(main)
    assert tags is not None, '%s main.yml does not import preflight.yml' % role
    assert role_tags <= tags, '%s: the preflight does not run under %s' % (role, sorted(role_tags - tags))


def test_no_program_in_a_python_c_string():
    found = subprocess.run(['grep', '-rnE', r'"-c"|- -c$|python[0-9.]* -c ', 'roles', 'playbooks'],
                           cwd=REPO, capture_output=True, text=True, check=False).stdout
    assert found == ''


def test_entry_points_extract_yml_calls_exist():
    text = (REPO / 'playbooks' / 'extract.yml').read_text()
    calls = re.findall(r'name: eagle3\.extraction\.(\w+)\n\s+tasks_from: (\w+)', text)
    # gpu_check reclaims in its own step there (gpu_check_reclaim); its tasks_from: reclaim is for other plays
    assert ('sglang_server', 'reclaim') in calls
    for role, entry in calls:
        assert os.path.exists(REPO / 'roles' / role / 'tasks' / (entry + '.yml')), (role, entry)
