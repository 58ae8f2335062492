"""How the proxmox_container role finds a hypervisor's GPUs and turns them into devN entries.

The local fleet's stand-in hypervisors have no /dev/nvidia* nodes, so the molecule scenario
only sees the no-GPU path. Here the role's preflight runs on this machine in a private mount
namespace whose /dev is a tmpfs holding real character device nodes with the majors and
minors of a 2 x H200 host (lab/fixtures/nvidia-smi/h200x2/idle/ls-dev-nvidia.txt) and a
/proc/devices with that host's nvidia lines (proc-devices-nvidia.txt). Nothing is opened, so
no driver is needed. The plan comes from pct_container in check mode against the stand-in
pct (lab/standins/pct/pct) with a throwaway config directory.

One ansible-playbook run covers every case (each case rebuilds the nodes it needs, runs the
role in a block and records what happened); the tests below read that record.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / 'lab' / 'fixtures' / 'nvidia-smi' / 'h200x2' / 'idle'
VENV_BIN = REPO / '.venv' / 'bin'

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which('unshare') or not (VENV_BIN / 'ansible-playbook').exists(),
    reason='needs root, unshare and the project venv (lab/bootstrap/venv.sh)')

# /dev as a tmpfs: the few real nodes ansible needs are bound from the host's /dev
NAMESPACE_SETUP = r"""
set -e
mount --rbind /dev "$WORK/hostdev"
mount -t tmpfs tmpfs /dev
for n in null zero full random urandom tty; do touch /dev/$n; mount --bind "$WORK/hostdev/$n" /dev/$n; done
mkdir /dev/pts /dev/shm
mount --bind "$WORK/hostdev/pts" /dev/pts
mount -t tmpfs tmpfs /dev/shm
ln -s /proc/self/fd /dev/fd
# each case rewrites $WORK/proc-devices (same inode) with its own nvidia majors
sed '/^Block devices:/,$d' /proc/devices | grep -v nvidia > "$WORK/proc-devices-host"
cp "$WORK/proc-devices-host" "$WORK/proc-devices"
mount --bind "$WORK/proc-devices" /proc/devices
exec "$@"
"""

# GPU nodes as `ls -l` shows them on the H200 host (major, minor)
H200_NODES = {
    '/dev/nvidia0': (195, 0), '/dev/nvidia1': (195, 1), '/dev/nvidiactl': (195, 255),
    '/dev/nvidia-uvm': (238, 0), '/dev/nvidia-uvm-tools': (238, 1),
    '/dev/nvidia-caps/nvidia-cap1': (241, 1), '/dev/nvidia-caps/nvidia-cap2': (241, 2),
    '/dev/nvidia-modeset': (195, 254),
}

PLAYBOOK = r"""
- name: The role's GPU discovery, case by case
  hosts: ct
  gather_facts: false
  vars:
    proxmox_container_ostemplate: local:vztmpl/debian-12-eagle3_amd64.tar
    proxmox_container_net: {{net0: "name=eth0,bridge=vmbr0,ip=dhcp"}}
    cases: {cases}
    record: {{}}
  tasks:
    - name: Run every case
      ansible.builtin.include_tasks: case.yml
      loop: "{{{{ cases }}}}"
      loop_control:
        loop_var: case
        label: "{{{{ case.name }}}}"
      tags: [always]

    - name: Write what happened
      ansible.builtin.copy:
        content: "{{{{ record | to_json }}}}"
        dest: {result}
        mode: "0600"
      tags: [always]
"""

CASE_TASKS = r"""
# every task is tagged always: --tags proxmox_container_preflight selects only the role's
# preflight (the include's tag is not inherited by the role's tasks; a block's would be)
- name: Make the case's device nodes and /proc/devices
  ansible.builtin.shell: |
    { cat "$WORK/proc-devices-host"; printf '%s\n' {{ case.majors | map('quote') | join(' ') }}; echo 'Block devices:'; } > "$WORK/proc-devices"
    rm -rf /dev/nvidia*
    mkdir -p /dev/nvidia-caps
    {% for path, mm in case.nodes.items() %}mknod {{ path }} c {{ mm[0] }} {{ mm[1] }}
    {% endfor %}
  changed_when: true
  tags: [always]

- name: Run the role's preflight
  block:
    - name: Include the role
      ansible.builtin.include_role:
        name: eagle3.extraction.proxmox_container
      vars:
        proxmox_container_gpus: "{{ case.vars.proxmox_container_gpus | default('all') }}"
        proxmox_container_require_gpus: "{{ case.vars.proxmox_container_require_gpus | default(true) }}"
        proxmox_container_extra_devices: "{{ case.vars.proxmox_container_extra_devices | default([]) }}"
      tags: [always]

    - name: Record the devices and the plan
      ansible.builtin.set_fact:
        record: "{{ record | combine({case.name: {'devices': __proxmox_container_nodes.devices,
                  'set': __proxmox_container_plan.changes.set}}) }}"
      tags: [always]
  rescue:
    - name: Record the failure
      ansible.builtin.set_fact:
        record: "{{ record | combine({case.name: {'failed': ansible_failed_result.msg}}) }}"
      tags: [always]
"""

H200_MAJORS = (FIXTURES / 'proc-devices-nvidia.txt').read_text().splitlines()
CASES = [
    {'name': 'all', 'nodes': H200_NODES, 'majors': H200_MAJORS, 'vars': {}},
    {'name': 'gpu1', 'nodes': H200_NODES, 'majors': H200_MAJORS, 'vars': {'proxmox_container_gpus': [1]}},
    {'name': 'gpu3_missing', 'nodes': H200_NODES, 'majors': H200_MAJORS, 'vars': {'proxmox_container_gpus': [0, 3]}},
    {'name': 'uvm_nodes_missing', 'nodes': {k: v for k, v in H200_NODES.items() if 'uvm' not in k},
     'majors': H200_MAJORS, 'vars': {}},
    {'name': 'extra_device', 'nodes': H200_NODES, 'majors': H200_MAJORS,
     'vars': {'proxmox_container_gpus': [0], 'proxmox_container_extra_devices': ['/dev/full']}},
    # a hypervisor without the driver, like the local fleet's
    {'name': 'no_gpus_required', 'nodes': {}, 'majors': [], 'vars': {}},
    {'name': 'no_gpus_not_required', 'nodes': {}, 'majors': [], 'vars': {'proxmox_container_require_gpus': False}},
]


@pytest.fixture(scope='module')
def cases(tmp_path_factory):
    """Run every case in one private mount namespace; returns {case name: record}."""
    work = tmp_path_factory.mktemp('gpus')
    (work / 'hostdev').mkdir()
    (work / 'setup.sh').write_text(NAMESPACE_SETUP)
    for name in ('conf', 'lxc', 'templates'):
        (work / name).mkdir()
    pct = work / 'pct'
    pct.write_text('#!/bin/sh\nPCT_CONF_DIR=%s/conf PCT_LXC_PATH=%s/lxc PCT_TEMPLATE_DIR=%s/templates '
                   'exec /usr/bin/python3 %s "$@"\n' % (work, work, work, REPO / 'lab/standins/pct/pct'))
    pct.chmod(0o755)
    (work / 'inventory.yml').write_text(
        'all:\n  hosts:\n'
        '    hv: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n'
        '    ct: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3,\n'
        '         proxmox_container_node: hv, proxmox_container_vmid: 150}\n')
    (work / 'case.yml').write_text(CASE_TASKS)
    result = work / 'result.json'
    (work / 'play.yml').write_text(PLAYBOOK.format(cases=json.dumps(CASES), result=result))
    env = dict(os.environ, WORK=str(work), PATH='%s:%s' % (VENV_BIN, os.environ['PATH']),
               ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0')
    # role vars (pct path, config dir) yield only to extra vars
    argv = ['unshare', '--mount', '--propagation', 'private', 'sh', str(work / 'setup.sh'),
            str(VENV_BIN / 'ansible-playbook'), '-i', str(work / 'inventory.yml'), str(work / 'play.yml'),
            '--tags', 'proxmox_container_preflight',
            '-e', '_proxmox_container_pct=%s' % pct, '-e', '_proxmox_container_conf_dir=%s/conf' % work]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and result.exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(result.read_text())


def test_fixture_nodes_are_the_captured_ones():
    """H200_NODES above is the capture of `ls -l /dev/nvidia*` on the H200 host."""
    listing = (FIXTURES / 'ls-dev-nvidia.txt').read_text()
    for path, (major, minor) in H200_NODES.items():
        if path == '/dev/nvidia-modeset':
            continue  # not in the capture; present on hosts with the modeset module
        name = path.rsplit('/', 1)[1]
        assert any(line.endswith(name) and re.search(r' %d,\s+%d ' % (major, minor), line)
                   for line in listing.splitlines()), path


def test_every_gpu_and_its_companions_become_dev_entries(cases):
    case = cases['all']
    assert case['devices'] == ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools',
                               '/dev/nvidiactl', '/dev/nvidia-caps/nvidia-cap1', '/dev/nvidia-caps/nvidia-cap2']
    # nvidia-modeset is for displays: not passed
    devs = {k: v for k, v in case['set'].items() if k.startswith('dev')}
    assert devs == {'dev%d' % i: path for i, path in enumerate(case['devices'])}


def test_a_chosen_gpu_takes_the_shared_nodes_but_not_the_other_gpu(cases):
    assert cases['gpu1']['devices'] == ['/dev/nvidia1', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidiactl',
                                        '/dev/nvidia-caps/nvidia-cap1', '/dev/nvidia-caps/nvidia-cap2']


def test_a_missing_gpu_fails_naming_it(cases):
    msg = cases['gpu3_missing']['failed']
    assert 'GPU device nodes missing: /dev/nvidia3.' in msg
    assert '/dev/nvidia0' in msg  # what was found is listed


def test_uvm_driver_without_its_nodes_fails_with_the_fix(cases):
    msg = cases['uvm_nodes_missing']['failed']
    assert 'nvidia-uvm driver is loaded (major 238) but /dev/nvidia-uvm does not exist' in msg
    assert 'nvidia-modprobe -u -c=0' in msg


def test_extra_devices_follow_the_gpus(cases):
    assert cases['extra_device']['devices'][0] == '/dev/nvidia0'
    assert cases['extra_device']['devices'][-1] == '/dev/full'
    assert '/dev/nvidia1' not in cases['extra_device']['devices']


def test_no_driver_fails_when_gpus_are_required(cases):
    msg = cases['no_gpus_required']['failed']
    assert 'the nvidia kernel module is not loaded' in msg
    assert 'proxmox_container_require_gpus' in msg


def test_no_driver_gives_no_dev_entries_when_gpus_are_not_required(cases):
    case = cases['no_gpus_not_required']
    assert case['devices'] == []
    assert not [k for k in case['set'] if k.startswith('dev')]
