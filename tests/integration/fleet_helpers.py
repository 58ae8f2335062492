"""Shared by the tests on the local fleet (lab/fleet/): whether it is up, SSH into its hosts
from the controller's own network namespace, through the lab's switch (lab-ctl), and the job's status files there."""

import json
import os
import subprocess

import pytest

LAB = os.environ.get('EAGLE3_LAB', '/var/lib/eagle3-lab')


def fleet_up():
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=False).stdout
    return any(line.split()[0] == 'lab-pve1' for line in out.splitlines() if line.strip())


# a test module on the fleet: `pytestmark = FLEET` (marked, and skipped with the reason when it is down)
FLEET = [
    pytest.mark.fleet,
    pytest.mark.skipif(not fleet_up(), reason='the local fleet is not up: run `make fleet` first'),
]


def lab_ssh(address, command, check=True, timeout=60):
    """A shell command as root on a fleet host; fails the test naming it, unless check is false."""
    argv = ['ssh', '-n', '-i', os.path.join(LAB, 'ssh', 'id_ed25519'), '-o', 'BatchMode=yes',
            '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR',
            '-o', 'ConnectTimeout=10', '-o', 'ProxyCommand=ip netns exec lab-ctl nc %h %p',
            'root@' + address, command]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if check:
        assert result.returncode == 0, '%s: %s\n%s%s' % (address, command, result.stdout, result.stderr)
    return result


def shard_statuses(run, job_dir):
    """{shard index: status.json} of every shard of the job dir on one host, read with ``run(command)`` (a command
    on that host, returning a CompletedProcess); {} when it cannot be read."""
    result = run('for f in %s/shard-*/status.json; do [ -f "$f" ] && cat "$f" && echo @@@; done' % job_dir)
    found = {}
    for text in result.stdout.split('@@@'):
        if text.strip():
            status = json.loads(text)
            found[int(status['shard_index'])] = status
    return found


def shown_json(runner, task):
    """The JSON a debug task printed once (status.yml's ``Show the report as JSON``), from an ansible-runner run's
    events; fails the test when the task printed it not exactly once."""
    shown = [event['event_data']['res']['msg'] for event in runner.events
             if event.get('event') == 'runner_on_ok' and event['event_data'].get('task') == task]
    assert len(shown) == 1, '%s printed %d times' % (task, len(shown))
    return json.loads(shown[0])
