"""A container reached only through its hypervisor, on the local fleet (issue 23).

ct4 (vmid 104 on pve2, lab/fleet/fleet.conf kind `pct`) has no network interface but loopback
and its sshd is masked: nothing reaches it but `pct exec` on pve2, which is what
community.proxmox.proxmox_pct_remote runs (inventory/demo-pct). From a stopped container, one
extract.yml brings its server up and starts a job; status.yml follows the job to its end; verify.yml
proves every sample is in the output once; stop.yml stops the server. Every step goes through pve2
alone: the test asserts at the start and at the end that ct4 still has no address and no sshd.
"""

import json
import os
import re
import subprocess
import time

import ansible_runner
import pytest

from collection_helpers import REPO, VENV_BIN
from fleet_helpers import FLEET, lab_ssh

INVENTORY = os.path.join(REPO, 'inventory', 'demo-pct')
NODE = '10.200.0.3'
VMID = 104
JOB = 'pctonly'
SAMPLES = 300
JOB_DIR = '/srv/eagle3-extraction/%s' % JOB
SERVER_UNIT = 'sglang-extraction.service'
PORT = 8000
TABLE_TASK = 'Print one line per extraction server, then each failure and its cause'
# ansible-runner's events of a task's result on a host
RESULTS = ('runner_on_ok', 'runner_on_failed', 'runner_on_skipped', 'runner_on_unreachable')


pytestmark = FLEET


def on_node(command, check=True, timeout=120):
    """A command on pve2 (the hypervisor), over SSH through the lab's switch."""
    return lab_ssh(NODE, command, check=check, timeout=timeout)


def in_ct4(command, check=True):
    """A shell command inside ct4, the only way in: pct exec on its node."""
    return on_node("pct exec %d -- sh -c '%s'" % (VMID, command), check=check)


def playbook(tmp_path, name, path, extravars=None, limit=None):
    private = tmp_path / name
    private.mkdir()
    if VENV_BIN not in os.environ['PATH'].split(os.pathsep):
        os.environ['PATH'] = VENV_BIN + os.pathsep + os.environ['PATH']
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=REPO, playbook=path, inventory=INVENTORY, limit=limit,
        extravars=extravars or {}, envvars={'ANSIBLE_CONFIG': os.path.join(REPO, 'ansible.cfg'), 'ANSIBLE_NOCOLOR': '1'},
        quiet=True)
    output = runner.stdout.read()
    (private / 'output.log').write_text(output)
    return runner, output


def debug_msg(runner, task):
    for event in runner.events:
        data = event.get('event_data', {})
        if event.get('event') == 'runner_on_ok' and data.get('task') == task:
            return data['res'].get('msg')
    return None


def failures(runner):
    """The messages of the tasks that failed."""
    return [event['event_data']['res'].get('msg', '') for event in runner.events
            if event.get('event') == 'runner_on_failed']


def host_events(runner, host, play):
    """(event, task) of each result of host in the play, in order (ok, changed, failed, skipped, unreachable)."""
    return [(event['event'], event['event_data'].get('task')) for event in runner.events
            if event.get('event') in RESULTS and event['event_data'].get('host') == host
            and event['event_data'].get('play') == play]


def isolation():
    """What reaches ct4 besides pct: its interfaces and its sshd."""
    interfaces = in_ct4('ip -o link show | cut -d: -f2').stdout.split()
    sshd = in_ct4('systemctl is-active ssh.service', check=False).stdout.strip()
    return interfaces, sshd


@pytest.fixture(scope='module')
def scenario(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('pct')
    found = {'before': isolation()}
    # from a stopped container, with no output of an earlier run of this test
    if on_node('pct status %d' % VMID).stdout.strip() == 'status: running':
        in_ct4('rm -rf %s' % JOB_DIR)
        on_node('pct stop %d' % VMID)
    dataset = tmp / 'dataset.jsonl'
    made = subprocess.run([os.path.join(VENV_BIN, 'python'), os.path.join(REPO, 'tests', 'job', 'demo_dataset.py'),
                           '--samples', str(SAMPLES), '--out', str(dataset)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    job = {'extraction_job_name': JOB}

    # --limit without localhost (where the inventory check runs) is refused before anything changes;
    # without the hypervisor, the container fails naming it
    runner, output = playbook(tmp, 'limited', 'extract.yml', dict(job, extraction_job_dataset=str(dataset)), limit='ct4')
    found['limit_rc'], found['limit_failures'] = runner.rc, failures(runner)
    found['limit_status'] = on_node('pct status %d' % VMID).stdout.strip()
    runner, output = playbook(tmp, 'no-node', 'extract.yml', dict(job, extraction_job_dataset=str(dataset)),
                              limit='ct4,localhost')
    found['no_node_rc'], found['no_node_failures'] = runner.rc, failures(runner)

    runner, output = playbook(tmp, 'extract', 'extract.yml', dict(job, extraction_job_dataset=str(dataset)))
    assert runner.rc == 0, output[-6000:]
    found['dataset_play'] = host_events(runner, 'ct4', 'One dataset for each job')
    found['table'] = debug_msg(runner, TABLE_TASK)
    found['server'] = in_ct4('systemctl is-active %s' % SERVER_UNIT, check=False).stdout.strip()

    deadline = time.time() + 300
    while True:
        runner, output = playbook(tmp, 'status-%d' % int(time.time()), 'playbooks/status.yml',
                                  dict(job, status_until_complete=True))
        if runner.rc == 0:
            break
        assert time.time() < deadline, 'the job did not complete in 300 s:\n' + output[-4000:]
        time.sleep(3)
    found['status'] = output

    runner, output = playbook(tmp, 'verify', 'playbooks/verify.yml', job)
    assert runner.rc == 0, output[-6000:]
    found['verify'] = output

    runner, output = playbook(tmp, 'stop', 'playbooks/stop.yml')
    assert runner.rc == 0, output[-6000:]
    found['after'] = isolation()
    found['stopped'] = in_ct4('systemctl is-active %s' % SERVER_UNIT, check=False).stdout.strip()
    found['listening'] = in_ct4('ss -H -ltn sport = :%d' % PORT).stdout.strip()
    found['manifest'] = in_ct4('cat %s/shard-0-of-1/status.json' % JOB_DIR).stdout
    return found


def test_the_container_is_reached_through_its_hypervisor_alone(scenario):
    # loopback only, and no sshd: before the run and after it
    assert scenario['before'] == (['lo'], 'inactive'), scenario['before']
    assert scenario['after'] == (['lo'], 'inactive'), scenario['after']


def test_extract_brings_the_server_up_and_the_table_says_how_it_is_reached(scenario):
    assert scenario['server'] == 'active'
    rows = [line for line in scenario['table'].splitlines() if line.startswith('ct4 ')]
    assert len(rows) == 1, scenario['table']
    cells = re.split(r'\s{2,}', rows[0])
    # no URL the controller could call: the one the container's own clients call, behind its hypervisor
    assert cells[1:] == ['104@pve2', '2 x NVIDIA H200', '580.159.04', 'via pve2: http://127.0.0.1:%d' % PORT,
                         'healthy', 'applied'], cells
    assert '1 of 1 servers healthy' in scenario['table']


def test_the_job_ran_to_its_end_and_verify_finds_every_sample_once(scenario):
    status = json.loads(scenario['manifest'])
    assert (status['state'], status['samples_done'], status['samples_total']) == ('complete', SAMPLES, SAMPLES), status
    assert re.search(r'\bct4\s+0/1\s+complete\s+%d\s+%d\s+100\.0' % (SAMPLES, SAMPLES), scenario['status']), \
        scenario['status'][-3000:]
    assert "verified: %d samples exactly once" % SAMPLES in scenario['verify'], scenario['verify'][-3000:]


def test_the_dataset_play_does_not_contact_the_stopped_container(scenario):
    # ct4 was stopped when the run began: its hypervisor's pct list says so, and the dataset play, which only
    # reads, skips it (the next play starts it) rather than failing to reach it; with no host to report a
    # dataset, the comparison is skipped too
    assert scenario['dataset_play'] == [
        ('runner_on_skipped',
         'The dataset this run gives the job, and the one each shard on the host was started with'),
        ('runner_on_skipped', 'Refuse a dataset changed under the same job name, for the whole job, before any shard '
                              'starts'),
    ], scenario['dataset_play']


def test_stop_stops_the_server_through_the_hypervisor(scenario):
    assert scenario['stopped'] == 'inactive'
    assert scenario['listening'] == ''


def test_a_limit_that_leaves_out_localhost_or_the_hypervisor_says_what_to_add(scenario):
    assert scenario['limit_rc'] != 0
    # (the dataset play before it skips the container: no hypervisor in the run answered for it)
    refused = [msg for msg in scenario['limit_failures'] if "--limit (ct4) leaves out localhost" in msg]
    # the check that refuses it, then the host's failure that names the check
    assert len(refused) == 2 and refused[1].startswith("ct4 failed in 'Check that the hypervisor answered and the "
                                                       "inventory check ran': "), scenario['limit_failures']
    assert "--limit 'ct4,pve2,localhost'" in refused[0]
    # refused before anything changed: the stopped container was not started
    assert scenario['limit_status'] == 'status: stopped'
    assert scenario['no_node_rc'] != 0
    # its only host failed, so the run ends there (no table): the failure names the hypervisor to add
    assert "ct4 failed in 'Check that the hypervisor answered and the inventory check ran': hypervisor pve2 is unreachable: it is not in this " \
        "run: name it in --limit beside its containers" in scenario['no_node_failures'], scenario['no_node_failures']
