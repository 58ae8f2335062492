# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""proxmox_container's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.module_utils.pct_formats import (
    HOSTNAME_RE, OSTEMPLATE_RE, SHM_SIZE_RE, SSH_KEY_RE, STORAGE_RE)
from ansible_collections.eagle3.extraction.plugins.module_utils.validate import show
from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import (
    NODE_NAME, Rule, each, number, pattern, vmid)
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'proxmox_container'

DEVICE = re.compile(r'/dev/[A-Za-z0-9_./-]+(,(gid|uid|mode)=[0-9]+)*')
RAW_LXC = re.compile(r'lxc\.[a-z0-9_.]+\s*[:=]\s*\S.*')
NET_KEY = re.compile(r'net[0-9]{1,2}')
FEATURES = {'nesting', 'keyctl', 'fuse', 'mount', 'mknod', 'force_rw_sys'}


def _gpus(value):
    if value == 'all':
        return None
    if not isinstance(value, (list, tuple)) or not value:
        return "neither 'all' nor a list of GPU indexes"
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 63:
            return 'item %s is not a GPU index from 0 to 63' % show(item)
    return None


def _net(value):
    for key, item in value.items():
        if not isinstance(key, str) or not NET_KEY.fullmatch(key):
            return 'has the key %s (netN)' % show(key)
        if not isinstance(item, (str, dict)):
            return '%s is neither a property string nor a dict' % key
    return None


def _features(value):
    for key, item in value.items():
        if key not in FEATURES:
            return 'has the feature %s (%s)' % (show(key), ', '.join(sorted(FEATURES)))
        if not isinstance(item, bool):
            return '%s: %s is not a boolean' % (key, show(item))
    return None


# the comment at the top of defaults/main.yml
DEFAULTS_HEADER = ['Every variable is described in meta/argument_specs.yml (Ansible validates them',
                   'before the first task) and in README.md. Set the first two per container host',
                   'in the inventory.']

ENTRY_POINTS = (
    EntryPoint(
        'main', 'Create or update a GPU LXC container on its Proxmox VE node and keep it running',
        description=[
            (
                'Runs on the container hosts of the inventory; every task that touches the container is delegated '
                'to its hypervisor, O(proxmox_container_node), where M(eagle3.extraction.pct_container) drives '
                'C(pct).'),
            (
                'Finds the NVIDIA device nodes of the hypervisor (C(/dev/nvidia[0-9]*), C(nvidiactl), '
                'C(nvidia-uvm), C(nvidia-uvm-tools), C(/dev/nvidia-caps/*)) and passes them, or the GPUs of '
                'O(proxmox_container_gpus), as C(devN) entries; sets C(/dev/shm), cores and memory; creates the '
                'container from O(proxmox_container_ostemplate) when it does not exist; starts it.'),
            (
                'A change that takes effect only after a restart of a running container (a raw line such as the '
                'C(/dev/shm) mount, a removed device, features, the hostname) restarts it only with '
                'O(proxmox_container_allow_restart=true). Otherwise the play fails before changing anything and '
                'lists what would change.'),
            (
                'Then waits until the container runs a command through C(pct exec) and answers over its '
                'connection: SSH to its own address, or C(community.proxmox.proxmox_pct_remote) through its node '
                '(then it needs no network, and its C(proxmox_vmid) and C(ansible_host) must be its '
                "O(proxmox_container_vmid) and its node's address). Run the role with C(gather_facts: false): the "
                'container may not exist when the play starts.'),
        ]),
)

VARIABLES = (
    Variable(
        'proxmox_container_node', 'str', '',
        description=(
            'Inventory name of the Proxmox VE node that holds the container, a host of the C(proxmox_hypervisors) '
            'group (required; set it per host).'),
        rule=pattern(NODE_NAME, 'the inventory name of a proxmox_hypervisors host', empty=True), peer=True,
        comment='Inventory name of the Proxmox VE node (hypervisor) that holds the container', group=True),
    Variable(
        'proxmox_container_vmid', 'int', 0,
        description=(
            "The container's ID on that node, 100 to 999999999 (required; set it per host). It is unique on its "
            'node as an integer (V(471) and V("0471") are one).'),
        rule=vmid(allow_zero=False),
        comment="The container's ID on that node"),
    Variable(
        'proxmox_container_ostemplate', 'str', '',
        description=[
            (
                'Template to create the container from when it does not exist, for example '
                'V(local:vztmpl/debian-12-eagle3_amd64.tar). Empty fails if the container is missing.'),
        ],
        rule=pattern(OSTEMPLATE_RE, '<storage>:vztmpl/<file> or an absolute path', empty=True),
        comment='Creation (used only when the container does not exist yet)', group=True),
    Variable(
        'proxmox_container_storage', 'str', 'local-lvm',
        description='Storage of the root file system at creation.',
        rule=pattern(STORAGE_RE, 'a Proxmox storage id')),
    Variable(
        'proxmox_container_rootfs_size', 'int', 0,
        description="Size of the root file system in GiB at creation, 0 to 131072; V(0) takes pct's default.",
        rule=number(0, 131072, 'GiB (0: pct default)'),
        comment="GiB; 0 = pct's default"),
    Variable(
        'proxmox_container_unprivileged', 'bool', True,
        description='Create an unprivileged container.'),
    Variable(
        'proxmox_container_ssh_public_keys', 'list', [],
        description=[
            (
                "Public keys for root's C(authorized_keys) at creation. The play reaches the container over SSH "
                "afterwards, so one of them must be the controller's."),
        ],
        elements='str',
        rule=each(pattern(SSH_KEY_RE, 'an OpenSSH public key line'))),
    Variable(
        'proxmox_container_hostname', 'str', '{{ inventory_hostname }}',
        description="The container's hostname.",
        rule=pattern(HOSTNAME_RE, 'a DNS name'),
        comment='Identity and network (netN -> property string or dict; only the ones listed are managed)', group=True),
    Variable(
        'proxmox_container_net', 'dict', {},
        description=[
            (
                'Network interfaces, C(netN) to a property string '
                '(V(name=eth0,bridge=vmbr0,ip=192.0.2.5/24,gw=192.0.2.1)) or a dict of the same keys. Only the '
                'interfaces listed are managed.'),
            'Needed at creation for the container to be reachable over SSH.',
        ],
        rule=Rule(_net, 'netN keys to property strings or dicts')),
    Variable(
        'proxmox_container_cores', 'int', 8,
        description='CPU cores, 1 to 8192.',
        rule=number(1, 8192, 'cores'),
        comment='Resources', group=True),
    Variable(
        'proxmox_container_memory', 'int', 65536,
        description='Memory limit in MiB, 16 or more (C(/dev/shm) counts against it).',
        rule=number(16, 268435456, 'MiB'),
        comment='MiB'),
    Variable(
        'proxmox_container_swap', 'int', 0,
        description='Swap limit in MiB, 0 or more.',
        rule=number(0, 268435456, 'MiB'),
        comment='MiB'),
    Variable(
        'proxmox_container_onboot', 'bool', True,
        description='Start the container when its node boots.'),
    Variable(
        'proxmox_container_features', 'dict', {'nesting': True},
        description=[
            (
                'Container features, for example V({nesting: true}); the configured set becomes exactly this one. '
                'V({}) leaves the features alone.'),
        ],
        rule=Rule(_features, 'features to booleans')),
    Variable(
        'proxmox_container_shm_size', 'str', '32G',
        description=[
            (
                "Size of the tmpfs on the container's C(/dev/shm), a number with C(k), C(m), C(g), C(t) or C(%) "
                '(V(256G), V(64T), V(512m), V(50%)). NCCL and the hidden-state dumps live there; too small and '
                'NCCL fails with C(Error while creating shared memory segment).'),
        ],
        rule=pattern(SHM_SIZE_RE, 'a tmpfs size: a number with k, m, g, t or % (64G, 64T, 50%)'),
        comment="tmpfs size of the container's /dev/shm"),
    Variable(
        'proxmox_container_gpus', 'raw', 'all',
        description=[
            (
                'V(all) passes every GPU of the node; a list of indexes from 0 to 63 (V([0, 1])) passes '
                'C(/dev/nvidia0) and C(/dev/nvidia1).'),
            'C(nvidiactl), C(nvidia-uvm), C(nvidia-uvm-tools) and C(/dev/nvidia-caps/*) go with any GPU.',
        ],
        rule=Rule(_gpus, "'all' or a list of GPU indexes from 0 to 63"),
        comment=(
            "GPUs: 'all' of the node's, or a list of indexes (/dev/nvidiaN); fail when the\n"
            'node has none (or lacks one asked for) unless require_gpus is false'), group=True),
    Variable(
        'proxmox_container_require_gpus', 'bool', True,
        description=[
            (
                'Fail when the node has no GPU device nodes, lacks a GPU of O(proxmox_container_gpus), has the '
                'C(nvidia-uvm) driver loaded without its device nodes, or has no C(nvidiactl).'),
            'V(false) (stand-in hypervisors without GPUs) passes whatever is there, possibly nothing.',
        ]),
    Variable(
        'proxmox_container_extra_devices', 'list', [],
        description=(
            'More device nodes of the node to pass through as C(devN) entries, for example '
            'V(/dev/dri/renderD128,gid=104).'),
        elements='str',
        rule=each(pattern(DEVICE, 'a /dev path with optional ,gid= ,uid= ,mode=')),
        comment='more device nodes of the node to pass through (devN entries), e.g. /dev/dri/renderD128'),
    Variable(
        'proxmox_container_raw_lxc', 'list', [],
        description=[
            (
                "Raw C(lxc.*) lines for the container's config, for example V(lxc.cgroup2.devices.allow: c 10:200 "
                'rwm). Their keys become owned by the role; lines of those keys not listed are removed.'),
        ],
        elements='str',
        rule=each(pattern(RAW_LXC, 'an lxc.<key>: <value> line')),
        comment="raw lxc.* lines of the container's config (their keys become owned by the role)"),
    Variable(
        'proxmox_container_allow_restart', 'bool', False,
        description=[
            (
                'Restart a running container when a change needs it (this kills whatever runs in it, such as the '
                'SGLang server). V(false) fails the play instead, before changing anything, listing what would '
                'change.'),
        ],
        comment=(
            'A change that needs a restart restarts the container only when this is true;\n'
            'otherwise the play fails and lists what would change'), group=True),
    Variable(
        'proxmox_container_shutdown_timeout', 'int', 60,
        description='Seconds a shutdown waits for the container before killing it, 1 to 86400.',
        rule=number(1, 86400, 'seconds')),
    Variable(
        'proxmox_container_wait_timeout', 'int', 300,
        description=(
            'Seconds to wait for the container to run commands (C(pct exec)) and, separately, to answer over SSH, '
            '1 to 86400.'),
        rule=number(1, 86400, 'seconds'),
        comment='seconds to wait for the container to run commands (pct exec) and to answer over SSH'),
)
