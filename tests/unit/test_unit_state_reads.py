"""A unit's state has one reader: server_health. No task runs `systemctl show`; extract.yml reads the
server unit's state once (sglang_server's tasks_from: unit_state) and gpu_check, the reclamation and
stop go by that result (sglang_server_unit_state); the only other look before the start is the wait's
baseline (its restarts and log size) in run.yml, and the capture gateway's baseline and wait (extraction_job's
gateway.yml). Whether a unit runs is decided by one function,
module_utils/server_probe.unit_running: the tasks read server_health's `running`, the job's units go
through the modules and the filter that call it."""

from __future__ import annotations

import re

import yaml

from test_role_entry_points import REPO, action, tasks_of

TASK_FILES = sorted(list((REPO / 'roles').glob('*/tasks/*.yml')) + list((REPO / 'roles').glob('*/handlers/*.yml'))
                    + list((REPO / 'playbooks').glob('*.yml')) + list((REPO / 'playbooks' / 'tasks').glob('*.yml')))


def every_task():
    for path in TASK_FILES:
        data = yaml.safe_load(path.read_text())
        plays = data if data and isinstance(data[0], dict) and 'hosts' in data[0] else None
        if plays:
            for play in plays:
                for task in play.get('tasks', []):
                    yield path, task
                    for key in ('block', 'rescue', 'always'):
                        for inner in task.get(key) or []:
                            yield path, inner
        else:
            for task in tasks_of(path):
                yield path, task


def argv(task):
    module = task.get('ansible.builtin.command') or {}
    return module.get('argv', []) if isinstance(module, dict) else str(module).split()


def test_no_task_runs_systemctl_show():
    shows = ['%s: %s' % (path.relative_to(REPO), task.get('name')) for path, task in every_task()
             if argv(task)[:2] == ['systemctl', 'show']]
    assert shows == []


def test_the_unit_state_is_read_once_and_the_others_read_that_result():
    readers = ['%s: %s' % (path.relative_to(REPO), task['name']) for path, task in every_task()
               if action(task) == 'eagle3.extraction.server_health']
    assert sorted(readers) == [
        # the online mode's capture gateway: its wait's baseline and its wait (one unit, no multi-node peers)
        "roles/extraction_job/tasks/gateway.yml: Read the gateway unit's state, its restarts and its log's size before "
        'the start',
        "roles/extraction_job/tasks/gateway.yml: Wait for the gateway's /health to answer 200",
        "roles/sglang_server/tasks/run.yml: Read the unit's state, its restarts and the log's size before the start",
        "roles/sglang_server/tasks/unit_state.yml: Read the unit's state (whether it exists, whether it runs)",
    ]
    unit_state = yaml.safe_load((REPO / 'roles' / 'sglang_server' / 'tasks' / 'unit_state.yml').read_text())
    assert unit_state[0]['register'] == 'sglang_server_unit_state'
    extract = (REPO / 'playbooks' / 'extract.yml').read_text()
    assert 'tasks_from: unit_state' in extract and "sglang_server_unit_state.running" in extract
    for name in ('reclaim.yml', 'stop.yml'):
        assert 'sglang_server_unit_state.' in (REPO / 'roles' / 'sglang_server' / 'tasks' / name).read_text(), name


# a second decision of "the unit is running": the states written out again, or systemctl asked to filter by them
RUNNING_DECIDED = re.compile(r"""['"]activating['"]|--state=""")
OWNER = REPO / 'plugins' / 'module_utils' / 'server_probe.py'


def test_whether_a_unit_runs_is_decided_in_one_place():
    sources = sorted(p for pattern in ('plugins/**/*.py', 'roles/**/*.yml', 'roles/**/*.j2', 'playbooks/**/*.yml',
                                       'extract.yml') for p in REPO.glob(pattern))
    offenders = [str(p.relative_to(REPO)) for p in sources if p != OWNER and RUNNING_DECIDED.search(p.read_text())]
    assert offenders == []
    for name in ('reclaim.yml',):
        assert 'sglang_server_unit_state.running' in (REPO / 'roles' / 'sglang_server' / 'tasks' / name).read_text()
    stop = (REPO / 'roles' / 'extraction_job' / 'tasks' / 'stop.yml').read_text()
    assert 'systemd_unit_names(running=true)' in stop


def test_the_check_above_finds_a_second_decision():
    assert RUNNING_DECIDED.search("when: x.active_state in ['active', 'activating', 'reloading']")
    assert RUNNING_DECIDED.search('argv: [systemctl, list-units, "--state=active,activating"]')
    assert RUNNING_DECIDED.search("RUNNING = ('active', 'activating', 'reloading')")
