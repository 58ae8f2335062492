"""inventory_check returns each server's address (plugin_utils/server_address.py) as the roles will have
it: the port moved by sglang_server_port, a wildcard and an IPv6 bind, a multi-node server's
rank 0; and refuses, once and naming the host, a host no address can be made of. One
ansible-playbook run on the controller per inventory (no host is contacted)."""

import json
import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PLAY = [{'hosts': 'localhost', 'gather_facts': False, 'tasks': [
    {'name': 'Check', 'eagle3.extraction.inventory_check': {
        'hosts': "{{ groups['extraction_servers'] }}", 'hypervisors': "{{ groups['proxmox_hypervisors'] }}"},
     'register': 'check', 'ignore_errors': True},
    {'name': 'Keep', 'ansible.builtin.copy': {'content': '{{ check | to_json }}', 'dest': '{{ out }}'}}]}]


def container(vmid, address, **more):
    return dict({'ansible_host': address, 'proxmox_container_node': 'pve1', 'proxmox_container_vmid': vmid,
                 'sglang_server_model_path': '/srv/models/m'}, **more)


def check(tmp_path, servers):
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(yaml.safe_dump({'all': {'children': {
        'proxmox_hypervisors': {'hosts': {'pve1': {'ansible_host': '10.0.0.250'}}},
        'extraction_servers': {'hosts': servers}}}}))
    playbook = tmp_path / 'check.yml'
    playbook.write_text(yaml.safe_dump(PLAY))
    out = tmp_path / 'check.json'
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(inventory),
                          str(playbook), '-e', 'out=%s' % out], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_host_gets_the_address_its_server_will_have(tmp_path):
    node = {'sglang_server_name': 'duo', 'sglang_server_host': '0.0.0.0', 'sglang_server_tp_size': 4,
            'gpu_check_gpu_count': 2}
    result = check(tmp_path, {
        'moved': container(101, '10.0.0.1', sglang_server_host='0.0.0.0', sglang_server_port=30000),
        'v6': container(102, '10.0.0.2', sglang_server_host='fd00::5', sglang_server_port=30001),
        'plain': container(103, '10.0.0.3'),
        'rank0': container(104, '10.0.0.4', sglang_server_node_rank=0, **node),
        'rank1': container(105, '10.0.0.5', sglang_server_node_rank=1, **node),
    })
    assert not result.get('failed'), result.get('msg')
    addresses = dict((host, plan['server']['address']) for host, plan in result['plans'].items())
    urls = dict((host, (found['port'], found['client_url'], found['controller_url']))
                for host, found in addresses.items())
    assert urls == {
        'moved': (30000, 'http://127.0.0.1:30000', 'http://10.0.0.1:30000'),
        'v6': (30001, 'http://[fd00::5]:30001', 'http://[fd00::5]:30001'),
        'plain': (8000, 'http://127.0.0.1:8000', 'http://10.0.0.3:8000'),
        'rank0': (8000, 'http://127.0.0.1:8000', 'http://10.0.0.4:8000'),
        'rank1': (8000, 'http://10.0.0.4:8000', 'http://10.0.0.4:8000'),
    }


def test_a_host_no_address_can_be_made_of_is_refused_once(tmp_path):
    result = check(tmp_path, {'ct1': container(101, '10.0.0.1', sglang_server_host='fd00:::5'),
                              'ct2': container(102, '10.0.0.2', sglang_server_port=70000)})
    assert result['failed'] and result['plans'] == {}
    # the port rule names ct2 (once); ct1's host passes the character rule and is refused by the address
    assert [error for error in result['errors'] if '70000' in error] == [
        'ct2: sglang_server_port=70000 is out of range; give a number from 1 to 65535'], result['errors']
    result = check(tmp_path, {'ct1': container(101, '10.0.0.1', sglang_server_host='fd00:::5')})
    assert result['errors'] == ["ct1: sglang_server_host='fd00:::5' is not an address to listen on; give an "
                                "IPv4 or IPv6 address (without brackets), a host name, 0.0.0.0 or ::"]


def test_the_port_or_host_in_the_flags_or_extra_args_is_refused_naming_the_variable(tmp_path):
    # one way in: the address the clients call and the config file the server reads cannot disagree
    result = check(tmp_path, {'ct1': container(101, '10.0.0.1', sglang_server_flags={'port': 30000}),
                              'ct2': container(102, '10.0.0.2', sglang_server_extra_args=['--port', '9001', '9002'])})
    assert result['failed'] and result['plans'] == {}
    assert sorted(result['errors']) == [
        "ct1: sglang_server_flags['port'] is set; --port is sglang_server_port's: set that instead",
        "ct2: sglang_server_extra_args[0]='--port' sets --port; --port is sglang_server_port's: set that instead"]


def test_every_bad_value_of_the_job_is_named_inf_included(tmp_path):
    """'inf' for an integer is one named error, not a crash that hides the others; what the role refused after
    the servers were deployed (a job name with '-', a dataset not on the controller, a dump dir that is not the
    server's, a dist-init port on the HTTP port) is named here, before any host is touched."""
    node = {'sglang_server_name': 'duo', 'sglang_server_host': '0.0.0.0', 'sglang_server_tp_size': 4,
            'gpu_check_gpu_count': 2, 'sglang_server_port': 5000}
    result = check(tmp_path, {
        'ct1': container(101, '10.0.0.1', extraction_job_concurrency='inf', extraction_job_name='share-gpt'),
        'ct2': container(102, '10.0.0.2', extraction_job_dataset=str(tmp_path / 'missing.jsonl')),
        'ct3': container(103, '10.0.0.3', extraction_job_dump_dir='/dev/shm/elsewhere'),
        'ct4': container(104, '10.0.0.4', sglang_server_node_rank=0, **node),
        'ct5': container(105, '10.0.0.5', sglang_server_node_rank=1, **node),
    })
    assert result['failed']
    expected = ["ct1: extraction_job_concurrency='inf' is not a finite number", "ct1: extraction_job_name='share-gpt'",
                "ct2: extraction_job_dataset='%s' is not a file on the controller" % (tmp_path / 'missing.jsonl'),
                "ct3: extraction_job_dump_dir='/dev/shm/elsewhere' is not the server's dump dir",
                'server duo: rank 0 (ct4) has sglang_server_dist_init_port=5000 (the default), the port it serves HTTP']
    assert [text for text in expected if not any(error.startswith(text) for error in result['errors'])] == [], \
        result['errors']
    assert len(result['errors']) == len(expected), result['errors']
