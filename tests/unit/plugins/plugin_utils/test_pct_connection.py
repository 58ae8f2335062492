"""A container reached through its hypervisor (plugin_utils/pct_connection.py): the plugin's vmid and
node must be the container's own, or every task would run in another container."""

import pytest

from ansible_collections.eagle3.extraction.plugins.plugin_utils.pct_connection import (
    PCT_CONNECTION, connection_errors, through_pct)

NODE = '10.0.0.3'


def container(**values):
    return dict({'ansible_connection': PCT_CONNECTION, 'ansible_host': NODE, 'proxmox_vmid': 104,
                 'proxmox_container_node': 'pve2', 'proxmox_container_vmid': 104}, **values)


def test_only_the_pct_connection_is_through_the_hypervisor():
    assert through_pct(container())
    assert not through_pct({'ansible_host': '10.0.0.104'})
    assert not through_pct(container(ansible_connection='ssh'))
    # a short name does not load the plugin (no `collections:` in the playbooks): it is not taken for it
    assert not through_pct(container(ansible_connection='proxmox_pct_remote'))


@pytest.mark.parametrize('values', [
    container(),
    container(proxmox_vmid='104'),                   # inventory strings and integers are one id
    container(proxmox_container_vmid='104'),
    # another connection: its ansible_host is its own, proxmox_vmid means nothing
    {'ansible_host': '10.0.0.104', 'proxmox_container_node': 'pve2', 'proxmox_container_vmid': 104},
    container(ansible_connection='ssh', proxmox_vmid=7, ansible_host='10.0.0.104'),
], ids=['all set', 'vmid as a string', 'container vmid as a string', 'ssh', 'ssh with other values'])
def test_a_container_its_plugin_reaches_passes(values):
    assert connection_errors('ct4', values, NODE) == []


@pytest.mark.parametrize('values, words', [
    (container(proxmox_vmid=None), ['proxmox_vmid=None is not proxmox_container_vmid=104']),
    ({k: v for k, v in container().items() if k != 'proxmox_vmid'},
     ['ct4: proxmox_vmid is not set', 'set it to proxmox_container_vmid (104)']),
    (container(proxmox_vmid=103), ['ct4: proxmox_vmid=103 is not proxmox_container_vmid=104',
                                   'every task would run in another container']),
    (container(ansible_host='10.0.0.104'),
     ["ct4: ansible_host='10.0.0.104' is not the address of its hypervisor pve2 ('10.0.0.3')"]),
    ({k: v for k, v in container().items() if k != 'ansible_host'},
     ["ct4: ansible_host='ct4' is not the address of its hypervisor pve2"]),
], ids=['vmid null', 'vmid not set', 'another vmid', 'the container address', 'no ansible_host'])
def test_a_plugin_that_would_reach_another_container_is_refused(values, words):
    errors = connection_errors('ct4', values, NODE)
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0], errors
