# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Containers reached through their hypervisor: the one owner of what that connection changes.

community.proxmox's connection plugin ``proxmox_pct_remote`` runs every command of a container as
``pct exec <proxmox_vmid> -- ...`` over SSH to the Proxmox node. Such a host's ``ansible_host`` is
therefore the node's address, not the container's: nothing may take it for the address a server
listens on or other nodes reach. And the node and the vmid the plugin uses must be the container's
own (``proxmox_container_node``, ``proxmox_container_vmid``), or every task runs in another
container: ``connection_errors`` refuses that, in the inventory check and the proxmox_container role.
"""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_vmid, show

PCT_CONNECTION = 'community.proxmox.proxmox_pct_remote'
# what the rules below read of a container, besides its proxmox_container_node and _vmid
READ = ('ansible_connection', 'ansible_host', 'proxmox_vmid')


def through_pct(values):
    """Whether the host is reached through its hypervisor (its ansible_host is the node's)."""
    return values.get('ansible_connection') == PCT_CONNECTION


def connection_errors(host, values, node_address):
    """Messages for one container reached through pct whose plugin would not reach it.

    ``values``: the host's variables (READ and proxmox_container_node/_vmid); ``node_address``: its
    hypervisor's ansible_host (else the hypervisor's inventory name). No message for another connection.
    """
    if not through_pct(values):
        return []
    errors = []
    node = values.get('proxmox_container_node')
    vmid = inventory_vmid(values.get('proxmox_container_vmid'))
    how = 'ansible_connection=%s runs its commands as `pct exec <proxmox_vmid>` on the node it SSHes to' \
        % PCT_CONNECTION
    if 'proxmox_vmid' not in values:
        errors.append('%s: proxmox_vmid is not set; %s: set it to proxmox_container_vmid (%s)'
                      % (host, how, show(values.get('proxmox_container_vmid'))))
    elif vmid is not None and inventory_vmid(values['proxmox_vmid']) != vmid:
        errors.append('%s: proxmox_vmid=%s is not proxmox_container_vmid=%s; %s, so every task would run in another '
                      'container: give both the same id' % (host, show(values['proxmox_vmid']), vmid, how))
    found = values.get('ansible_host') or host
    if isinstance(node, str) and node and found != node_address:
        errors.append('%s: ansible_host=%s is not the address of its hypervisor %s (%s); %s, so ansible_host must be '
                      'that node\'s address, the one the proxmox_hypervisors group reaches it at'
                      % (host, show(found), node, show(node_address), how))
    return errors
