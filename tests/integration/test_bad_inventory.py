"""extract.yml against broken inventories: the first play (on the controller) fails, naming
each host, variable and value, and no later play starts, so no hypervisor or container is
contacted. The hosts point at TEST-NET addresses that nothing answers: a later play would show
them in the recap. Three ansible-playbook runs in all, a few seconds each; no fleet needed."""

import os
import re
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PLAYBOOK = os.path.join(REPO, 'playbooks', 'extract.yml')
KEY = 'sk-never-shown-7f3a'

HYPERVISORS = {'pve1': {'ansible_host': '192.0.2.1'}, 'pve2': {'ansible_host': '192.0.2.2'}}
GOOD = {'ansible_host': '192.0.2.10', 'proxmox_container_node': 'pve1', 'sglang_server_model_path': '/srv/models/m'}

# host -> (its variables over GOOD, what the first play must say about it)
BROKEN = {
    'dup1': ({'proxmox_container_vmid': 471}, 'dup1 and dup2 and dup3 are all container 471 on pve1'),
    'dup2': ({'proxmox_container_vmid': '471'}, None),
    'dup3': ({'proxmox_container_vmid': '0471'}, None),
    'lonely': ({'proxmox_container_vmid': 472, 'proxmox_container_node': 'localhost'},
               "lonely: proxmox_container_node='localhost' is not a host of the proxmox_hypervisors group"),
    'nomodel': ({'proxmox_container_vmid': 473, 'sglang_server_model_path': ''},
                'nomodel: sglang_server_model_path is not set'),
    'badtp': ({'proxmox_container_vmid': 474, 'sglang_server_tp_size': 3, 'gpu_check_gpu_count': 8},
              'badtp: sglang_server_tp_size=3 does not divide gpu_check_gpu_count=8'),
    'rootfs': ({'proxmox_container_vmid': 475, 'proxmox_container_rootfs_size': -5},
               'rootfs: proxmox_container_rootfs_size=-5 is out of range'),
    'shmfree': ({'proxmox_container_vmid': 476, 'sglang_server_shm_min_free_gib': -5},
                'shmfree: sglang_server_shm_min_free_gib=-5 is out of range'),
    'shmline': ({'proxmox_container_vmid': 477, 'proxmox_container_shm_size': '64G\n'},
                "shmline: proxmox_container_shm_size='64G\\n' holds a control character"),
    'nic': ({'proxmox_container_vmid': 478, 'sglang_server_interconnect': 'infiniband'},
            'nic: value of sglang_server_interconnect must be one of: nvlink, pcie, got: infiniband'),
    'sysdir': ({'proxmox_container_vmid': 479, 'ml_env_path': '/usr'},
               "sysdir: ml_env_path='/usr' is a system directory"),
    'vmidabc': ({'proxmox_container_vmid': 480, 'sglang_server_vmid': 'abc'},
                "vmidabc: argument 'sglang_server_vmid' is of type str and we were unable to convert to int"),
    'keyline': ({'proxmox_container_vmid': 481, 'sglang_server_api_key': KEY + '\n--port 1'},
                'keyline: sglang_server_api_key=(hidden) holds a control character'),
    'flagline': ({'proxmox_container_vmid': 482, 'sglang_server_flags': {'chat-template': 'a\nb'}},
                 "flagline: sglang_server_flags={'chat-template': 'a\\nb'} holds a control character"),
    'novmid': ({}, 'novmid: proxmox_container_vmid is not set'),
}


def write_inventory(path, servers, all_vars=None):
    inventory = {'all': {'vars': dict({'ansible_ssh_common_args': '-o ConnectTimeout=1'}, **(all_vars or {})),
                         'hosts': {'localhost': {'ansible_connection': 'local'}},
                         'children': {'proxmox_hypervisors': {'hosts': HYPERVISORS},
                                      'extraction_servers': {'hosts': servers}}}}
    path.write_text(yaml.safe_dump(inventory))
    return str(path)


def run_extract(inventory, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_HOST_KEY_CHECKING='true')
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', inventory,
                          PLAYBOOK] + list(args), cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    return out.returncode, out.stdout + out.stderr


def recap_hosts(output):
    recap = output.split('PLAY RECAP', 1)[1]
    return re.findall(r'^(\S+)\s+: ok=', recap, re.M)


def assert_stopped_in_the_first_play(rc, output):
    assert rc != 0, output
    assert 'PLAY [Check the inventory]' in output
    assert 'the inventory is not valid; nothing was changed' in output
    assert 'PLAY [Hypervisors' not in output and 'PLAY [Bring' not in output, output[-3000:]
    assert recap_hosts(output) == ['localhost'], output[-2000:]


def test_a_broken_inventory_fails_in_the_first_play_naming_every_problem(tmp_path):
    servers = dict((host, dict(GOOD, **values)) for host, (values, unused) in BROKEN.items())
    inventory = write_inventory(tmp_path / 'hosts.yml', servers,
                                {'extract_serial': [], 'extract_max_fail_percentage': '150%'})
    rc, output = run_extract(inventory)
    assert_stopped_in_the_first_play(rc, output)
    for unused, expected in BROKEN.values():
        if expected:
            assert expected in output, expected
    assert 'extract_serial=[] is empty' in output
    assert "extract_max_fail_percentage='150%' is not an integer from 0 to 100" in output
    assert KEY not in output


def test_bad_rollout_values_given_on_the_command_line_fail_before_any_host(tmp_path):
    servers = {'ct1': dict(GOOD, proxmox_container_vmid=101), 'ct2': dict(GOOD, proxmox_container_vmid=101,
                                                                          proxmox_container_node='pve2')}
    inventory = write_inventory(tmp_path / 'hosts.yml', servers)
    rc, output = run_extract(inventory, '-e', 'extract_serial=abc', '-e', 'extract_max_fail_percentage=-1')
    assert_stopped_in_the_first_play(rc, output)
    assert "extract_serial='abc': 'abc' is neither a number of hosts nor a percentage" in output
    assert "extract_max_fail_percentage='-1' is not an integer from 0 to 100" in output
    # the two hosts are fine (one vmid on two nodes is two containers): no host is named
    assert not re.search(r'^\s*-? ?.?ct[12]: ', output, re.M), output


def test_a_good_inventory_passes_the_first_play(tmp_path):
    servers = {'ct1': dict(GOOD, proxmox_container_vmid=101, sglang_server_tp_size=4, gpu_check_gpu_count=8,
                           proxmox_container_shm_size='64T', sglang_server_api_key=KEY),
               'ct2': dict(GOOD, proxmox_container_vmid='102')}
    inventory = write_inventory(tmp_path / 'hosts.yml', servers, {'extract_serial': [1, '100%']})
    # --limit localhost: the later plays find no host, so none is contacted
    rc, output = run_extract(inventory, '--limit', 'localhost')
    assert rc == 0, output[-3000:]
    check = output.split('TASK [Check every container', 1)[1].split('PLAY [', 1)[0]
    assert 'ok: [localhost]' in check, output[-3000:]
    assert recap_hosts(output) == ['localhost'] and re.search(r'localhost\s+: ok=\d+ .*failed=0', output)
