"""How a container is reached through its hypervisor: inventory_check (extract.yml's first task) and
proxmox_container's role_input_check (the role run on its own) give the same verdict, and the role
tells its preflight that the container needs no network of its own."""

from __future__ import annotations

import importlib.util
import os
from unittest import mock

import pytest
from ansible_collections.eagle3.extraction.plugins.action import inventory_check, role_input_check

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location('agree', os.path.join(HERE, 'test_inventory_and_role_agree.py'))
AGREE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(AGREE)

PCT = 'community.proxmox.proxmox_pct_remote'
NODES = {'pve1': {'ansible_host': '10.0.0.2'}, 'pve2': {}}
CONTAINER = {'proxmox_container_node': 'pve1', 'proxmox_container_vmid': 104,
             'sglang_server_model_path': '/srv/models/m'}

CASES = [
    # (id, the host's connection values, words of the error both checks give; None: both pass)
    ('over ssh', {'ansible_host': '10.0.0.104'}, None),
    ('through pct', {'ansible_connection': PCT, 'ansible_host': '10.0.0.2', 'proxmox_vmid': 104}, None),
    ('through pct, vmid as a string', {'ansible_connection': PCT, 'ansible_host': '10.0.0.2', 'proxmox_vmid': '104'},
     None),
    ('node without ansible_host: its name', {'ansible_connection': PCT, 'ansible_host': 'pve2', 'proxmox_vmid': 104,
                                             'proxmox_container_node': 'pve2'}, None),
    ('no proxmox_vmid', {'ansible_connection': PCT, 'ansible_host': '10.0.0.2'}, 'proxmox_vmid is not set'),
    ('another vmid', {'ansible_connection': PCT, 'ansible_host': '10.0.0.2', 'proxmox_vmid': 103},
     'proxmox_vmid=103 is not proxmox_container_vmid=104'),
    ("the container's address", {'ansible_connection': PCT, 'ansible_host': '10.0.0.104', 'proxmox_vmid': 104},
     "ansible_host='10.0.0.104' is not the address of its hypervisor pve1"),
    ('a node that is not in the inventory', {'proxmox_container_node': 'pve9'},
     "proxmox_container_node='pve9' is not a host of the"),
]


@pytest.fixture(scope='module', autouse=True)
def cached_specs():
    with mock.patch.object(role_input_check, 'load_specs', return_value=AGREE.SPECS), \
            mock.patch.object(inventory_check, 'load_specs', return_value=AGREE.SPECS):
        yield


@pytest.mark.parametrize('values, words', [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_inventory_check_and_the_role_agree(values, words):
    host = dict(CONTAINER, **values)
    hostvars = dict(NODES, ct4=host)
    inventory = AGREE.run_action(inventory_check, {'hosts': ['ct4'], 'hypervisors': list(NODES), 'rollout': {}},
                                 {'hostvars': hostvars})
    task_vars = dict(AGREE.DEFAULTS['proxmox_container'], hostvars=hostvars, inventory_hostname='ct4', **host)
    role = AGREE.run_action(role_input_check, {'role': 'proxmox_container'}, task_vars)
    if words is None:
        assert not inventory.get('failed'), inventory.get('errors')
        assert not role.get('failed'), role.get('errors')
    else:
        assert [error for error in inventory['errors'] if words in error] != [], inventory['errors']
        assert [error for error in role['errors'] if words in error] != [], role['errors']
    assert role.get('through_pct') is (values.get('ansible_connection') == PCT)
