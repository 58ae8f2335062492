"""Shared by the tests on the local fleet (lab/fleet/): whether it is up, SSH into its hosts
from the controller's own network namespace, through the lab's switch (lab-ctl), and the job's status files there."""

import json
import os
import subprocess

import pytest

from collection_helpers import REPO, VENV_BIN

LAB = os.environ.get('EAGLE3_LAB', '/var/lib/eagle3-lab')


def fleet_up():
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=False).stdout
    return any(line.split()[0] == 'lab-pve1' for line in out.splitlines() if line.strip())


# a test module on the fleet: `pytestmark = FLEET` (marked, and skipped with the reason when it is down)
FLEET = [
    pytest.mark.fleet,
    pytest.mark.skipif(not fleet_up(), reason='the local fleet is not up: run `make fleet` first'),
]


# the containers reached over SSH, by name (ct4 is reached through pct only)
CTS = {'ct1': '10.200.0.101', 'ct2': '10.200.0.102', 'ct3': '10.200.0.103'}


def ct(name, command, **kwargs):
    """lab_ssh on a container by its name."""
    return lab_ssh(CTS[name], command, **kwargs)


def require_containers_up():
    """Fails the test, saying what to run, when a container does not answer."""
    for name in CTS:
        assert ct(name, 'true', check=False, timeout=15).returncode == 0, '%s does not answer: run lab/fleet/up.sh' % name


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


def job_inputs(tmp, samples):
    """What a job on the fleet starts from: the wheelhouse ml_env installs from, holding this checkout's stand-in
    (seconds when it does), and a dataset of ``samples`` demo conversations in ``tmp``; its path."""
    subprocess.run(['bash', os.path.join(REPO, 'lab', 'fleet', 'wheelhouse.sh')], check=True, capture_output=True,
                   timeout=900)
    dataset = tmp / 'dataset.jsonl'
    subprocess.run([os.path.join(VENV_BIN, 'python'), os.path.join(REPO, 'tests', 'job', 'demo_dataset.py'),
                    '--samples', str(samples), '--out', str(dataset)], check=True, capture_output=True)
    return dataset


def remove_job(run, job, shard_count, *paths):
    """No unit or file of the job ``job`` on one host, from an earlier run of a test, through ``run(command)``: its
    shard units (a frozen one thawed) stopped, disabled and reset; its output, configs, dataset copy and logs removed,
    and ``paths`` (the test's own files)."""
    units = ' '.join('eagle3-extraction-job@%s-shard-%d.service' % (job, i) for i in range(shard_count))
    run('systemctl kill -s CONT %s >/dev/null 2>&1; systemctl disable --now %s >/dev/null 2>&1; '
        'systemctl reset-failed %s >/dev/null 2>&1; rm -rf /srv/eagle3-extraction/%s /etc/eagle3-extraction/%s-* '
        '/var/lib/eagle3-extraction/%s.jsonl /var/log/eagle3-extraction/%s-* %s; true'
        % (units, units, units, job, job, job, job, ' '.join(paths)))
