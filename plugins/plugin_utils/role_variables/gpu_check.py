# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_check's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

import re

from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import NODE_NAME, number, path, pattern
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'gpu_check'

DRIVER_VERSION = re.compile(r'[0-9]{1,4}(\.[0-9]{1,4}){0,2}')
# the comment at the top of defaults/main.yml
DEFAULTS_HEADER = ['Every variable is described in meta/argument_specs.yml (Ansible validates them',
                   'before the first task) and in README.md.']

ENTRY_POINTS = (
    EntryPoint(
        'main', 'Check that the GPUs carry the pinned driver, are all there and are empty',
        description=[
            (
                'Reads the NVIDIA driver, the GPUs and their processes with M(eagle3.extraction.gpu_facts) and '
                'fails, naming the GPU, the figure and the limit, unless the driver version, GPU count, model, '
                "memory used, compute processes and persistence mode are as asked and the container's driver "
                "equals its hypervisor's kernel module."),
            (
                'With O(gpu_check_reclaim=true) it first kills what holds the GPUs '
                '(M(eagle3.extraction.process_reclaim) with C(gpu_holders)) and then checks.'),
            (
                'Sets the facts C(gpu_check_interconnect) (V(nvlink) or V(pcie)) and C(gpu_check_gpus) for later '
                'roles.'),
        ]),
    EntryPoint(
        'reclaim', 'Kill what holds the GPUs (SIGTERM, then SIGKILL) and wait for their memory'),
)

VARIABLES = (
    Variable(
        'gpu_check_nvidia_smi_path', 'str', '',
        description='Path of nvidia-smi; empty finds it on E(PATH), then in C(/usr/bin).',
        rule=path(empty=True),
        comment="nvidia-smi to run; '' finds it on PATH (then /usr/bin)", group=True),
    Variable(
        'gpu_check_driver_version', 'str', '',
        description='The exact driver version every GPU must run, for example V(580.159.04); empty skips the check.',
        rule=pattern(DRIVER_VERSION, 'a driver version such as 580.159.04', empty=True),
        comment="Driver: an exact version ('' = any) and/or a minimum ('' = none)", group=True),
    Variable(
        'gpu_check_driver_version_min', 'str', '',
        description=(
            'The lowest driver version allowed, compared number by number (V(580.159) is above V(580.95)); empty '
            'skips the check.'),
        rule=pattern(DRIVER_VERSION, 'a driver version such as 580', empty=True)),
    Variable(
        'gpu_check_gpu_count', 'int', 0,
        description=(
            'How many GPUs nvidia-smi must show, 0 to 64; V(0) accepts any number (at least one GPU is always '
            'required).'),
        rule=number(0, 64, 'GPUs (0: any)'),
        comment="GPUs: how many (0 = any number, at least one) and which product name ('' = any)", group=True),
    Variable(
        'gpu_check_gpu_model', 'str', '',
        description=[
            (
                'The product name every GPU must have, exactly as nvidia-smi prints it, for example V(NVIDIA H200) '
                '(which V(NVIDIA H200 NVL) is not); empty accepts any.'),
        ]),
    Variable(
        'gpu_check_memory_used_max_mib', 'int', 0,
        description='The most memory in MiB any GPU may have in use; V(0) requires empty GPUs.',
        rule=number(0, 1048576, 'MiB'),
        comment=(
            'Most memory in MiB any GPU may have in use (0: empty GPUs only); compute\n'
            'processes are never allowed'), group=True),
    Variable(
        'gpu_check_require_idle', 'bool', True,
        description=[
            (
                'Check the memory in use and the compute processes (and reclaim with O(gpu_check_reclaim)). '
                'V(false) when the GPUs are meant to be busy, as C(extract.yml) does while its own server runs on '
                'them.'),
        ],
        comment=(
            'false: the GPUs may be busy (extract.yml, while its own server runs on them):\n'
            'neither the memory nor the compute processes are checked, nothing is reclaimed')),
    Variable(
        'gpu_check_persistence_mode', 'bool', True,
        description=[
            (
                'Require persistence mode V(Enabled) on every GPU. It is set on the hypervisor (C(nvidia-smi -pm '
                '1) or the nvidia-persistenced service), not in a container.'),
        ],
        comment='Require persistence mode Enabled on every GPU', group=True),
    Variable(
        'gpu_check_hypervisor', 'str', "{{ proxmox_container_node | default('') }}",
        description=[
            (
                'Inventory name of the Proxmox hypervisor that runs the container. Its kernel module version, read '
                "from C(/proc/driver/nvidia/version) there by delegation, must equal the container's driver and "
                'nvidia-smi versions.'),
            'Defaults to C(proxmox_container_node) when the host has it; empty skips the comparison.',
        ],
        rule=pattern(NODE_NAME, 'an inventory host name', empty=True),
        comment=(
            "Inventory name of the Proxmox hypervisor whose kernel module the container's\n"
            "driver must match ('' = skip the comparison)"), group=True),
    Variable(
        'gpu_check_reclaim', 'bool', False,
        description=[
            (
                'When a GPU has more memory in use than O(gpu_check_memory_used_max_mib) or a compute process, '
                'kill the processes that hold the GPUs (M(eagle3.extraction.process_reclaim) with C(gpu_holders) - '
                'every process with C(/dev/nvidia*) open or listed by nvidia-smi), wait until the memory is back '
                'under the limit and check again. V(false) fails at once and kills nothing.'),
            'It kills a running server on these GPUs, too.',
        ],
        comment=(
            'Kill what holds the GPUs (eagle3.extraction.process_reclaim with gpu_holders)\n'
            'and check again, instead of failing at once'), group=True),
    Variable(
        'gpu_check_reclaim_signal_timeout', 'int', 10,
        description='Seconds between SIGTERM and SIGKILL when reclaiming, 1 to 3600.',
        rule=number(1, 3600, 'seconds')),
    Variable(
        'gpu_check_reclaim_kill_timeout', 'int', 10,
        description='Seconds to wait for killed processes to go after SIGKILL, 1 to 3600.',
        rule=number(1, 3600, 'seconds')),
    Variable(
        'gpu_check_reclaim_wait_timeout', 'int', 60,
        description=(
            'Seconds to wait, after the kill, for every GPU to come down to O(gpu_check_memory_used_max_mib), 1 to '
            '86400.'),
        rule=number(1, 86400, 'seconds')),
)
