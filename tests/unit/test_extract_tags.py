"""A role's step tags select that step through extract.yml: `--tags sglang_server_run` lists
sglang_server's run tasks (with its preflight, which every step relies on, and the reads every
step goes by) and no step of the other roles; the inventory check and the naming of a failure
run under any tag. Read from `ansible-playbook --list-tasks`: a subprocess, as ansible-core's CLI
initialises process-wide contexts (vault secrets, the collection finder) once and cannot run twice in
one process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from test_role_entry_points import REPO

STEP_TAG = re.compile(r'\b(proxmox_container|gpu_check|ml_env|sglang_patch|sglang_server|extraction_job)_'
                      r'(preflight|gather|reclaim|check|install|configure|run)\b')


def listed(*args):
    """{play name: [(task, [tags])]} from ansible-playbook extract.yml --list-tasks ``args``."""
    playbook = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    answer = subprocess.run([playbook, 'extract.yml', '-i', 'inventory/demo', '--list-tasks'] + list(args), cwd=REPO,
                            capture_output=True, text=True, check=False, timeout=120)
    out = answer.stdout
    assert answer.returncode == 0, out + answer.stderr
    plays, play = {}, None
    for line in out.splitlines():
        head = re.match(r'\s+play #\d+ \([^)]*\): (.*?)\tTAGS', line)
        if head:
            play = plays.setdefault(head.group(1), [])
            continue
        task = re.match(r'\s{6}(.*)\tTAGS: \[(.*)\]$', line)
        if task and play is not None:
            play.append((task.group(1), [t.strip() for t in task.group(2).split(',') if t.strip()]))
    return plays, out


def steps(tasks):
    """The role tasks among ``tasks``, as (role, task), leaving out ansible's own argument validation."""
    found = []
    for name, dummy in tasks:
        role, sep, task = name.partition(' : ')
        if sep and not task.startswith('Validating arguments against arg spec'):
            found.append((role.rsplit('.', 1)[-1], task))
    return found


def test_sglang_server_run_selects_the_run_tasks_and_no_other_role_step():
    plays, out = listed('--tags', 'sglang_server_run')
    servers = plays['Bring each extraction server up']
    chosen = steps(servers)
    roles = set(role for role, dummy in chosen)
    assert roles == {'sglang_server'}, out
    names = [task for dummy, task in chosen]
    # the run step itself: the start and the wait (one task), the published address
    for task in ('Wait for /health to answer 200 on every node of the server, or fail with the node and cause '
                 '(after enabling and starting the unit)',
                 'Publish what runs, for later plays (extract.yml fingerprints it)'):
        assert task in names, out
    # not the other steps of sglang_server
    for task in ('Write the unit', 'Write the server\'s flags and API key to its root-only config file'):
        assert task not in names, out
    assert plays['Check the inventory'], out


def test_a_failure_under_tags_still_fails_its_host():
    """--list-tasks does not list a rescue: read from the play. An untagged rescue would be skipped under
    --tags, and the host that failed the selected step would be counted as rescued, not failed."""
    play = [play for play in yaml.safe_load((REPO / 'playbooks' / 'extract.yml').read_text())
            if play['name'] == 'Bring each extraction server up'][0]
    rescue = [task for task in play['tasks'] if 'rescue' in task][0]['rescue']
    assert [task['name'] for task in rescue if 'always' not in task.get('tags', [])] == []


@pytest.mark.parametrize('tag, role, task', [
    ('ml_env_install', 'ml_env', None),
    ('sglang_server_configure', 'sglang_server', 'Write the unit'),
    ('gpu_check_check', 'gpu_check', None),
    ('proxmox_container_run', 'proxmox_container', None),
])
def test_each_role_step_tag_selects_only_that_role(tag, role, task):
    plays, out = listed('--tags', tag)
    chosen = steps(plays['Bring each extraction server up'])
    # the unit's state is a read every step of the play goes by (tagged always)
    others = set(r for r, t in chosen if r != role and t != 'Read the unit\'s state (whether it exists, whether it runs)')
    assert chosen and not others, out
    assert all(STEP_TAG.search(' '.join(tags)) or 'always' in tags for dummy, tags in plays['Bring each extraction server up'])
    if task:
        assert task in [t for dummy, t in chosen], out
